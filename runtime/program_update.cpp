// What runs before the update: fp16's unscaling and overflow check (GradScaler's
// unscale_ and step), then clipping by the global norm
// (torch.nn.utils.clip_grad_norm_), in PyTorch's order.

#include <cmath>

#include "runtime/program.h"

namespace mplan::rt {

bool Program::prepare_update() {
  last_gradient_norm_.reset();
  if (!spec_.loss_scaling && clip_norm_ <= 0) return true;
  // The weight gradients are written on the compute stream only (and, on
  // several ranks, summed on the gradient stream: a bounded wait first).
  if (collectives_ != nullptr && spec_.data_parallel != nullptr) collectives_->finish_step();
  stream_synchronize(compute_stream_);
  std::vector<float> gradients;
  if (spec_.loss_scaling) {
    const float inverse = inverse_scale(loss_scale_.scale);
    bool non_finite = false;
    for (int32_t i = 0; i < spec_.weight_gradient_count; ++i) {
      const Region& g = spec_.weight_gradients[i];
      gradients = read_floats(g.offset, g.bytes / 4, 0);
      non_finite |= unscale_and_check(gradients.data(), static_cast<int64_t>(gradients.size()), inverse);
      if (!gradients.empty()) copy_to_device(bytes(g.offset), gradients.data(), gradients.size() * sizeof(float));
    }
    const bool apply = update_loss_scale(loss_scale_, non_finite, loss_scale_rules_);
    last_update_skipped_ = !apply;
    if (!apply) {
      // The update zeroes the gradients it used; a skipped one must too, so
      // that the next step accumulates from zero.
      for (int32_t i = 0; i < spec_.weight_gradient_count; ++i) {
        const Region& g = spec_.weight_gradients[i];
        if (g.bytes > 0) fill_u32_async(bytes(g.offset), 0u, static_cast<size_t>(g.bytes), compute_stream_);
      }
      return false;
    }
  }
  if (clip_norm_ > 0) {
    // The global 2-norm over every gradient element (in double; PyTorch takes
    // the norm of the per-tensor float norms, the same to rounding).
    double squares = 0;
    for (int32_t i = 0; i < spec_.weight_gradient_count; ++i) {
      const Region& g = spec_.weight_gradients[i];
      gradients = read_floats(g.offset, g.bytes / 4, 0);
      for (float v : gradients) squares += static_cast<double>(v) * v;
    }
    const double norm = std::sqrt(squares);
    last_gradient_norm_ = norm;
    const auto coefficient = static_cast<float>(clip_norm_ / (norm + 1e-6));
    if (coefficient < 1.0f) {
      for (int32_t i = 0; i < spec_.weight_gradient_count; ++i) {
        const Region& g = spec_.weight_gradients[i];
        gradients = read_floats(g.offset, g.bytes / 4, 0);
        for (float& v : gradients) v *= coefficient;
        if (!gradients.empty()) copy_to_device(bytes(g.offset), gradients.data(), gradients.size() * sizeof(float));
      }
    }
  }
  return true;
}

}  // namespace mplan::rt
