#pragma once
// The CPU kernels of runtime/ops_channel.h (which says what each computes),
// in channel_ops.cpp: plain synchronous functions with the API's arguments less
// the context; runtime/cpu/ops_channel.cpp runs them on the CPU streams.
// Sums over many terms accumulate in double, as the other CPU kernels do.

#include <cstdint>

namespace mplan::rt::cpu {

// ---- channel ops (channel_ops.cpp) ------------------------------------------------------------

void channel_mul_forward(const float* x, const float* s, float* y, int64_t n, int64_t c, int64_t inner,
                         bool s_per_sample);
void channel_mul_backward_x(const float* s, const float* dy, float* dx, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate);
void channel_mul_backward_s(const float* x, const float* dy, float* ds, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate);
void adaptive_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                               int64_t out_w);
void adaptive_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool accumulate);
void channel_shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                     bool accumulate);
void slice_forward(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols);
void slice_backward(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                    bool accumulate);

}  // namespace mplan::rt::cpu
