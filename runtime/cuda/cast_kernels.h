#pragma once
// The CUDA backend's kernels of the casts (runtime/ops_casts.h), in casts.cu,
// converting as runtime/sixteen_bit.h does (CUDA's round-to-nearest-even
// conversions of cuda_bf16.h and cuda_fp16.h).
//
// Host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

void cast_to_float(const uint8_t* src, float* dst, int64_t count, int64_t stored, int64_t rounded,
                   cudaStream_t stream);
void cast_from_float(const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result, bool accumulate,
                     cudaStream_t stream);
void zero_floats(float* dst, int64_t count, cudaStream_t stream);
// y (n, out) = bias (out) in every row: 16-bit patterns, copied (the
// 16-bit linear layer's bias before its GEMM adds to it).
void broadcast_rows_16(const uint8_t* bias, uint8_t* y, int64_t n, int64_t out, cudaStream_t stream);
// y (n, k, hw) = bias (k) in every channel: the same for the 16-bit convolution.
void broadcast_channels_16(const uint8_t* bias, uint8_t* y, int64_t n, int64_t k, int64_t hw, cudaStream_t stream);

}  // namespace mplan::rt::cuda
