#pragma once
// Per-channel sums over a tensor laid out (n, c, hw), one block of
// kReduceThreads per channel, in double and without atomics (deterministic):
// batch norm's statistics and gradients (batchnorm.cu) and layer norm's
// parameter gradients (normalization.cu). For .cu files only.
//
// Why a block per channel with 1024 threads: ResNet-50's first batch norm has
// 64 channels; 64 blocks of 256 threads, each with one load in flight, took
// 3.49 ms for the backward of a 103 MB tensor on the H100
// (docs/gpu-validation.md).

#include <cstdint>

namespace mplan::rt::cuda {

inline constexpr int kReduceThreads = 1024;

// The sum of `value` over the block (of kReduceThreads threads), in double;
// every thread gets it.
__device__ __forceinline__ double block_sum(double value) {
  __shared__ double partial[kReduceThreads];
  __syncthreads();  // the previous call's readers are done with `partial`
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return partial[0];
}

// The walk of one thread over a channel's n*hw values: j = first, first +
// step, ... as (sample b, pixel i), element (b * c + ch) * hw + i, with one
// division at the start instead of a 64-bit division and modulo per element
// (each is dozens of instructions on a GPU). The order of j, and so every
// sum, is the one the kernels had with a division per element.
struct ChannelWalk {
  int64_t b, i, step_b, step_i, n, c, ch, hw;
  __device__ ChannelWalk(int64_t first, int64_t step, int64_t n_, int64_t c_, int64_t ch_, int64_t hw_)
      : b(first / hw_), i(first % hw_), step_b(step / hw_), step_i(step % hw_), n(n_), c(c_), ch(ch_), hw(hw_) {}
  __device__ bool more() const { return b < n; }
  __device__ int64_t at() const { return (b * c + ch) * hw + i; }
  // The position (b, i) as one index, b * hw + i: where per-position values
  // (layer norm's mean and 1/std) are.
  __device__ int64_t position() const { return b * hw + i; }
  __device__ void next() {
    b += step_b;
    i += step_i;
    if (i >= hw) {
      i -= hw;
      ++b;
    }
  }
};

}  // namespace mplan::rt::cuda
