#pragma once
// Helpers shared by the CUDA backend's kernels (.cu files only).

#include <cstdint>

// The grid-stride loop over [0, count) (each thread takes i, i + all threads, ...).
#define MPLAN_FOR_EACH(i, count)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Launches `kernel` over `count` items on `stream` (one thread each, the
// grid-stride loop taking the rest) and checks the launch; nothing for no
// items. Needs runtime/cuda/stream.h and runtime/cuda/check.h.
#define MPLAN_LAUNCH(kernel, count, ...)                             \
  do {                                                               \
    if ((count) <= 0) return;                                        \
    kernel<<<blocks_for(count), kThreads, 0, stream>>>(__VA_ARGS__); \
    MPLAN_CUDA_CHECK_LAUNCH();                                       \
  } while (0)

namespace mplan::rt::cuda {

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// A gradient element written (accumulate false) or added (true).
__device__ __forceinline__ void store(float* dx, int64_t i, float g, bool accumulate) {
  dx[i] = accumulate ? dx[i] + g : g;
}

}  // namespace mplan::rt::cuda
