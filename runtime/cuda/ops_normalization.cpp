// The CUDA backend of runtime/ops_normalization.h: the backend's own kernels
// (normalization_kernels.h). Every op enqueues on its context's stream and
// returns.

#include "runtime/cuda/normalization_kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cuda::Launch;

void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* invstd, int64_t outer, int64_t c, int64_t inner, float eps) {
  Launch L(ctx);
  cuda::layernorm_forward(x, gamma, beta, y, mean, invstd, outer, c, inner, eps, L.stream());
}
void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate) {
  Launch L(ctx);
  cuda::layernorm_backward_data(x, gamma, mean, invstd, dy, dx, outer, c, inner, accumulate, L.stream());
}
void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  Launch L(ctx);
  cuda::layernorm_backward_params(x, mean, invstd, dy, dgamma, dbeta, outer, c, inner, L.stream());
}

}  // namespace mplan::rt
