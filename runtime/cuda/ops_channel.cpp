// The CUDA backend of runtime/ops_channel.h: the backend's own kernels
// (channel_kernels.h). Every op enqueues on its context's stream and returns.

#include "runtime/cuda/channel_kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cuda::Launch;

void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample) {
  Launch L(ctx);
  cuda::channel_mul_forward(x, s, y, n, c, inner, s_per_sample, L.stream());
}
void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  Launch L(ctx);
  cuda::channel_mul_backward_x(s, dy, dx, n, c, inner, s_per_sample, accumulate, L.stream());
}
void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  Launch L(ctx);
  cuda::channel_mul_backward_s(x, dy, ds, n, c, inner, s_per_sample, accumulate, L.stream());
}
void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w) {
  Launch L(ctx);
  cuda::adaptive_avg_pool_forward(x, y, planes, h, w, out_h, out_w, L.stream());
}
void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, bool accumulate) {
  Launch L(ctx);
  cuda::adaptive_avg_pool_backward(dy, dx, planes, h, w, out_h, out_w, accumulate, L.stream());
}
void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner,
                     int64_t groups, bool accumulate) {
  Launch L(ctx);
  cuda::channel_shuffle(x, y, n, c, inner, groups, accumulate, L.stream());
}
void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols) {
  Launch L(ctx);
  cuda::slice_forward(x, y, outer, x_cols, offset, y_cols, L.stream());
}
void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate) {
  Launch L(ctx);
  cuda::slice_backward(dy, dx, outer, x_cols, offset, y_cols, accumulate, L.stream());
}

}  // namespace mplan::rt
