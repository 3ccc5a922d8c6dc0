#pragma once
// The CUDA backend's kernels of the activations (runtime/ops_activations.h),
// in activations.cu: one launcher for every forward and one for every
// backward, the function chosen by an enum, with the formulas of
// runtime/cpu/activations.cpp.
//
// Host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

enum class Activation : int { hardswish, hardsigmoid, silu, sigmoid, gelu, gelu_tanh, clip };
// y = f(x); clip takes its range as (low, high), the others ignore them.
void activation_forward(Activation f, const float* x, float* y, int64_t count, float low, float high,
                        cudaStream_t stream);
// dx = f'(...) * dy from `in`, the input x or (sigmoid, clip) the output y.
void activation_backward(Activation f, const float* in, const float* dy, float* dx, int64_t count, float low,
                         float high, bool accumulate, cudaStream_t stream);

}  // namespace mplan::rt::cuda
