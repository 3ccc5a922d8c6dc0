#pragma once
// The dropout mask's random number: a counter-based hash of (seed, step,
// global sample index, element index) (in the spirit of Philox, Salmon et al.
// 2011), so the mask does not depend on how the batch is divided into
// sub-batches (docs/generated-program.md, "Semantics"), and the CPU and CUDA
// backends drop exactly the same elements.

#include <cstdint>

#ifdef __CUDACC__
#define MPLAN_HOST_DEVICE __host__ __device__
#else
#define MPLAN_HOST_DEVICE
#endif

namespace mplan::rt {

// SplitMix64's finaliser (Steele et al. 2014): a bijective 64-bit mixer.
MPLAN_HOST_DEVICE inline uint64_t dropout_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits: an element is kept when it is >= p.
MPLAN_HOST_DEVICE inline float dropout_hash_uniform(uint64_t seed, uint64_t step, uint64_t sample,
                                                    uint64_t element) {
  uint64_t h = dropout_mix64(seed + 0x9e3779b97f4a7c15ull);
  h = dropout_mix64(h ^ (step * 0xd1b54a32d192ed03ull));
  h = dropout_mix64(h ^ (sample * 0xabc98388fb8fac03ull));
  h = dropout_mix64(h ^ (element * 0x8cb92ba72f3d8dd7ull));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace mplan::rt
