#pragma once
// The CUDA backend's layer normalisation (runtime/ops_normalization.h) and
// row softmax (runtime/ops_attention.h: softmax, and attention's
// probabilities), in normalization.cu, computing as runtime/cpu/layernorm.cpp
// and runtime/cpu/attention.cpp.
//
// Host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps, cudaStream_t stream);
void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate,
                             cudaStream_t stream);
void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner,
                               cudaStream_t stream);
// Row softmax, y may equal x.
void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
// dx = y * (dy - sum(dy * y)) per row; dx may equal dy (attention's dP -> dS in place).
void softmax_rows_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate,
                           cudaStream_t stream);

}  // namespace mplan::rt::cuda
