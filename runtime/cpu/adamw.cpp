// AdamW, torch.optim.AdamW's update (amsgrad off, the single-tensor form):
// decoupled weight decay, then the moments, then the bias-corrected step.

#include <cmath>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/op_profile.h"

namespace mplan::rt::cpu {

void adamw_step(float* w, const float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr, float beta1,
                float beta2, float eps, float weight_decay, uint64_t step) {
  OpTimer timer(OpKind::sgd);
  // PyTorch's scalars are Python floats (double), applied to float tensors.
  const double t = static_cast<double>(step + 1);
  const auto decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const double correction1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const auto correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)));
  const auto step_size = static_cast<float>(static_cast<double>(lr) / correction1);
  const float keep1 = 1.0f - beta1, keep2 = 1.0f - beta2;
  for (int64_t i = 0; i < count; ++i) {
    w[i] *= decay;
    exp_avg[i] = beta1 * exp_avg[i] + keep1 * g[i];
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + keep2 * g[i] * g[i];
    const float denom = std::sqrt(exp_avg_sq[i]) / correction2_sqrt + eps;
    w[i] -= step_size * (exp_avg[i] / denom);
  }
}

}  // namespace mplan::rt::cpu
