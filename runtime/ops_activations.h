#pragma once
// The activations of the runtime's op API: element-wise functions of one
// tensor and their gradients (MobileNet's hardswish and hardsigmoid,
// EfficientNet's SiLU, squeeze-and-excitation's sigmoid, the transformers'
// GELU, ReLU6 as clip). ReLU is in runtime/ops.h with the other
// element-wise ops.
//
// Part of the backend-neutral API of runtime/ops.h (which includes this
// file) and under its rules: the execution context first, explicit sizes,
// `accumulate` on every gradient an op writes (false writes, true adds),
// parameter gradients always accumulate (the update zeroes them). Each
// kernel's semantics are PyTorch's, named beside it.
//
// CPU: runtime/cpu/activations.cpp (activation_kernels.h). CUDA:
// runtime/cuda/activations.cu (activation_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- activations, element-wise over `count` floats ------------------------------------
// Backward reads the input x, or the output y where that determines PyTorch's
// derivative exactly (sigmoid, clip).

// F.hardswish: x * relu6(x + 3) / 6.
void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count);
// PyTorch's hardswish_backward: 0 below -3, dy * (x / 3 + 0.5) up to 3, dy above.
void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate);
// F.hardsigmoid: relu6(x + 3) / 6.
void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy / 6 where -3 < x < 3 (PyTorch's rule), else 0.
void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate);
// F.silu (swish): x * sigmoid(x).
void silu_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy * s * (1 + x * (1 - s)), s = sigmoid(x).
void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool accumulate);
// torch.sigmoid.
void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy * y * (1 - y).
void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count,
                      bool accumulate);
// F.gelu: x * Phi(x) with the erf form, or approximate='tanh':
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation);
void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate);
// torch.clamp / F.hardtanh (ReLU6 is min 0, max 6).
void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max);
// dy where min < y < max, else 0 (hardtanh_backward's rule, exact from y).
void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min,
                   float max, bool accumulate);

}  // namespace mplan::rt
