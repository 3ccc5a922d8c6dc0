// The CPU backend of runtime/ops_normalization.h: each op captures its
// arguments by value and runs its kernel (runtime/cpu/normalization_kernels.h)
// when the stream reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/normalization_kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* invstd, int64_t outer, int64_t c, int64_t inner, float eps) {
  launch(ctx, [=] { cpu::layernorm_forward(x, gamma, beta, y, mean, invstd, outer, c, inner, eps); });
}

void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate) {
  launch(ctx, [=] { cpu::layernorm_backward_data(x, gamma, mean, invstd, dy, dx, outer, c, inner, accumulate); });
}

void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  launch(ctx, [=] { cpu::layernorm_backward_params(x, mean, invstd, dy, dgamma, dbeta, outer, c, inner); });
}

}  // namespace mplan::rt
