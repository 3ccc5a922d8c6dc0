// SGD with momentum and weight decay, exactly torch.optim.SGD's update
// (dampening 0, no Nesterov).

#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

void sgd_step(float* w, const float* g, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay, bool first_step) {
  for (int64_t i = 0; i < count; ++i) {
    float d = g[i];
    if (weight_decay != 0.0f) d += weight_decay * w[i];
    if (momentum != 0.0f) {
      momentum_buf[i] = first_step ? d : momentum * momentum_buf[i] + d;
      d = momentum_buf[i];
    }
    w[i] -= lr * d;
  }
}

}  // namespace mplan::rt::cpu
