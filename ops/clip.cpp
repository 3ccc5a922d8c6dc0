// clip: min(max(x, min), max), PyTorch's Hardtanh / clamp; ReLU6 (MobileNet
// v2) is the default range [0, 6]. Backward needs only Y: the gradient passes
// where min < Y < max, which is exactly where min < X < max.

#include <cmath>

#include "ops/activation.h"

namespace mplan::ops {
namespace {

std::string check_clip_range(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high) || !(low < high))
    return fmt::format("min must be below max (both finite), got min {} and max {}", low, high);
  return {};
}

void read_fields(const MapReader& r, Layer& layer) {
  layer.clip_min = r.optional_double("min", 0.0);
  layer.clip_max = r.optional_double("max", 6.0);
  if (std::string why = check_clip_range(layer.clip_min, layer.clip_max); !why.empty())
    r.fail(r.has("max") ? r.get("max") : r.get("min"), why);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (std::string why = check_clip_range(layer.clip_min, layer.clip_max); !why.empty()) return failure(why);
  return {in.shapes[0], {}};
}

std::vector<rt::Arg> extra(const Layer& layer) {
  return {real(static_cast<float>(layer.clip_min)), real(static_cast<float>(layer.clip_max))};
}

constexpr ActivationKernels kKernels{.forward = rt::Kernel::clip_forward,
                                     .backward = rt::Kernel::clip_backward,
                                     .backward_reads_output = true,
                                     .flops_per_element = 2,
                                     .extra = extra};

}  // namespace

extern const OpSpec clip_spec = activation_spec<kKernels>({
    .op = Op::clip,
    .name = "clip",
    .fields = {"min", "max"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
});

}  // namespace mplan::ops
