#pragma once
// The channel ops of the runtime's op API: per-channel multiply
// (squeeze-and-excitation, layer scale), adaptive average pooling, channel
// shuffle (ShuffleNet) and the slice of one axis (torch.chunk).
//
// Part of the backend-neutral API of runtime/ops.h (which includes this
// file) and under its rules: the execution context first, explicit sizes,
// `accumulate` on every gradient an op writes (false writes, true adds),
// parameter gradients always accumulate (the update zeroes them). Each
// kernel's semantics are PyTorch's, named beside it.
//
// CPU: runtime/cpu/channel_ops.cpp (channel_kernels.h). CUDA:
// runtime/cuda/channel_ops.cu (channel_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- per-channel multiply ----------------------------------------------------------------
// x (n, c, inner) times one factor per channel: s (n, c) when s_per_sample
// (squeeze-and-excitation's x * scale, or an element-wise product with
// c = elements, inner = 1), s (c) shared by every sample otherwise (a
// learned per-channel scale, ConvNeXt's layer scale).
void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample);
// dx = dy * s.
void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate);
// ds = sum over inner (and over the samples when s is shared) of dy * x.
void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate);

// ---- adaptive average pooling (F.adaptive_avg_pool2d) ----------------------------------
// planes = n * c images of h x w to out_h x out_w; output cell i averages input
// rows floor(i*h/out_h) .. ceil((i+1)*h/out_h) - 1, columns alike.
void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w);
void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h,
                                int64_t w, int64_t out_h, int64_t out_w, bool accumulate);

// ---- channel shuffle (ShuffleNet's view / transpose / view) -----------------------------
// y[b, j*groups + i] = x[b, i*(c/groups) + j] for planes of `inner` floats. Its
// backward is the shuffle with c/groups groups.
void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner,
                     int64_t groups, bool accumulate);

// ---- slice of one axis (torch.chunk / narrow) ---------------------------------------------
// y (outer, y_cols) = x[:, offset : offset + y_cols] of x (outer, x_cols).
void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols);
// dx[:, offset : offset + y_cols] = dy; written: zero elsewhere; accumulated:
// added there only.
void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate);

}  // namespace mplan::rt
