// SGD with momentum and weight decay, exactly torch.optim.SGD's update
// (dampening 0, with or without Nesterov). One branch-free loop per case, so
// each vectorises.

#include "runtime/cpu/vectorize.h"
#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {
namespace {

MPLAN_VECTOR_CLONES void step_momentum(float* __restrict w, const float* __restrict g, float* __restrict buf,
                                       int64_t count, float lr, float momentum, float weight_decay, bool first) {
  if (first) {
    for (int64_t i = 0; i < count; ++i) {
      const float d = g[i] + weight_decay * w[i];
      buf[i] = d;
      w[i] -= lr * d;
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const float d = momentum * buf[i] + (g[i] + weight_decay * w[i]);
      buf[i] = d;
      w[i] -= lr * d;
    }
  }
}

// Nesterov: the buffer as above, then w -= lr * (d + momentum * buf).
MPLAN_VECTOR_CLONES void step_nesterov(float* __restrict w, const float* __restrict g, float* __restrict buf,
                                       int64_t count, float lr, float momentum, float weight_decay, bool first) {
  for (int64_t i = 0; i < count; ++i) {
    const float d = g[i] + weight_decay * w[i];
    const float b = first ? d : momentum * buf[i] + d;
    buf[i] = b;
    w[i] -= lr * (d + momentum * b);
  }
}

MPLAN_VECTOR_CLONES void step_plain(float* __restrict w, const float* __restrict g, int64_t count, float lr,
                                    float weight_decay) {
  for (int64_t i = 0; i < count; ++i) w[i] -= lr * (g[i] + weight_decay * w[i]);
}

}  // namespace

void sgd_step(float* w, const float* g, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay, bool first_step, bool nesterov) {
  OpTimer timer(OpKind::sgd);
  // weight_decay == 0 adds 0 * w: the same value unless w is infinite or NaN, which
  // has already failed the step.
  if (momentum != 0.0f && nesterov) {
    step_nesterov(w, g, momentum_buf, count, lr, momentum, weight_decay, first_step);
  } else if (momentum != 0.0f) {
    step_momentum(w, g, momentum_buf, count, lr, momentum, weight_decay, first_step);
  } else {
    step_plain(w, g, count, lr, weight_decay);
  }
}

}  // namespace mplan::rt::cpu
