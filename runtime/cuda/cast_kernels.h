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

}  // namespace mplan::rt::cuda
