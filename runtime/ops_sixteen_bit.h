#pragma once
// The 16-bit forms of the kernels of autocast's 16-bit ops (docs/generated-
// program.md, "16-bit kernels"): convolution and linear with bfloat16 or
// float16 operands and float accumulation, as cuDNN's and cuBLAS's
// tensor-core kernels compute (PyTorch autocast's convolutions and GEMMs).
// Each takes the float kernel's parameters (runtime/ops.h) with its tensors
// as 16-bit patterns of `type` (runtime/ops_casts.h: 1 bfloat16, 2 float16),
// the float kernel's `accumulate` dropped, and `type` last: every result is
// written, rounded to `type` to nearest even, never added. A 16-bit program
// adds a weight gradient to its float32 block with the casts.
//
// On CUDA they are cuDNN's convolutions on 16-bit descriptors with a float
// compute type and tensor-core math, and cublasGemmEx with
// CUBLAS_COMPUTE_32F. The CPU backend, the reference, widens every operand
// exactly, runs the float kernel and rounds each result: what the casts
// around the float kernel compute, bit for bit.
//
// Part of the backend-neutral API of runtime/ops.h (which includes this file).
// CPU: runtime/cpu/ops_sixteen_bit.cpp. CUDA: runtime/cuda/conv.cpp (convolutions),
// runtime/cuda/ops_sixteen_bit.cpp (linear).

#include <cstdint>

#include "runtime/device.h"
#include "runtime/types.h"

namespace mplan::rt {

// The workspace the algorithm needs for the shape in `type`, in bytes; -1
// where the backend does not run it so (conv_workspace_bytes's 16-bit form;
// on CUDA the graph API's configurations are float32 only).
int64_t conv_workspace_bytes_16(const Context& ctx, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo,
                                int64_t type);
// y = conv(x, w) + bias (bias may be null), one rounding.
void conv_forward_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                     const uint8_t* w, const uint8_t* bias, uint8_t* y, void* workspace, int64_t workspace_bytes,
                     int64_t type);
// dx = conv_transpose(dy, w) (BP1).
void conv_backward_data_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* w,
                           const uint8_t* dy, uint8_t* dx, void* workspace, int64_t workspace_bytes, int64_t type);
// dw = the filter gradient of this batch (BP2): written, not added.
void conv_backward_filter_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                             const uint8_t* dy, uint8_t* dw, void* workspace, int64_t workspace_bytes, int64_t type);

// y (n, out) = x (n, in) * w^T + bias, one rounding.
void linear_forward_16(const Context& ctx, const uint8_t* x, const uint8_t* w, const uint8_t* bias, uint8_t* y,
                       int64_t n, int64_t in, int64_t out, int64_t type);
// dx (n, in) = dy (n, out) * w.
void linear_backward_data_16(const Context& ctx, const uint8_t* w, const uint8_t* dy, uint8_t* dx, int64_t n,
                             int64_t in, int64_t out, int64_t type);
// dw (out, in) = dy^T * x: written, not added.
void linear_backward_weights_16(const Context& ctx, const uint8_t* x, const uint8_t* dy, uint8_t* dw, int64_t n,
                                int64_t in, int64_t out, int64_t type);

}  // namespace mplan::rt
