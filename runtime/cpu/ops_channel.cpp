// The CPU backend of runtime/ops_channel.h: each op captures its arguments by
// value and runs its kernel (runtime/cpu/channel_kernels.h) when the stream
// reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/channel_kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample) {
  launch(ctx, [=] { cpu::channel_mul_forward(x, s, y, n, c, inner, s_per_sample); });
}

void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  launch(ctx, [=] { cpu::channel_mul_backward_x(s, dy, dx, n, c, inner, s_per_sample, accumulate); });
}

void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  launch(ctx, [=] { cpu::channel_mul_backward_s(x, dy, ds, n, c, inner, s_per_sample, accumulate); });
}

void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w) {
  launch(ctx, [=] { cpu::adaptive_avg_pool_forward(x, y, planes, h, w, out_h, out_w); });
}

void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, bool accumulate) {
  launch(ctx, [=] { cpu::adaptive_avg_pool_backward(dy, dx, planes, h, w, out_h, out_w, accumulate); });
}

void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                     bool accumulate) {
  launch(ctx, [=] { cpu::channel_shuffle(x, y, n, c, inner, groups, accumulate); });
}

void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols) {
  launch(ctx, [=] { cpu::slice_forward(x, y, outer, x_cols, offset, y_cols); });
}

void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate) {
  launch(ctx, [=] { cpu::slice_backward(dy, dx, outer, x_cols, offset, y_cols, accumulate); });
}

}  // namespace mplan::rt
