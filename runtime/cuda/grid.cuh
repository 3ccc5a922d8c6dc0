#pragma once
// Helpers shared by the CUDA backend's kernels (.cu files only).

#include <cstdint>

// The grid-stride loop over [0, count) (each thread takes i, i + all threads, ...).
#define MPLAN_FOR_EACH(i, count)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

namespace mplan::rt::cuda {

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

}  // namespace mplan::rt::cuda
