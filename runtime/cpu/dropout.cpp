// Dropout with a counter-based mask: the decision for an element is a hash of
// (seed, step, global sample index, element index) (in the spirit of Philox,
// Salmon et al. 2011), so it does not depend on how the batch is divided into
// sub-batches (DESIGN.md, "Semantics kept under sub-batching").

#include "runtime/ops.h"

namespace mplan::rt {
namespace {

// SplitMix64's finaliser (Steele et al. 2014): a bijective 64-bit mixer.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ (step * 0xd1b54a32d192ed03ull));
  h = mix64(h ^ (sample * 0xabc98388fb8fac03ull));
  h = mix64(h ^ (element * 0x8cb92ba72f3d8dd7ull));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t b = 0; b < n; ++b) {
    const uint64_t sample = static_cast<uint64_t>(first_sample + b);
    for (int64_t e = 0; e < sample_elements; ++e) {
      const int64_t at = b * sample_elements + e;
      const bool keep = dropout_uniform(seed, step, sample, static_cast<uint64_t>(e)) >= p;
      mask[at] = keep ? 1 : 0;
      y[at] = keep ? x[at] * scale : 0.0f;
    }
  }
}

void dropout_backward(const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const float g = mask[i] ? dy[i] * scale : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

}  // namespace mplan::rt
