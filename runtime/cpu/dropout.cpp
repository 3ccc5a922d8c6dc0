// Dropout with a counter-based mask (runtime/dropout_hash.h): the decision for
// an element does not depend on how the batch is divided into sub-batches, and
// the CUDA backend drops the same elements.

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/vectorize.h"
#include "runtime/dropout_hash.h"
#include "runtime/cpu/op_profile.h"

namespace mplan::rt::cpu {
namespace {

// dropout_hash_uniform split in two: the hash of (seed, step, sample), shared
// by a sample's elements, then one mix per element (the same value).
inline uint64_t mix64(uint64_t z) { return dropout_mix64(z); }

// The hash of (seed, step, sample): the part of dropout_uniform shared by a sample's elements.
inline uint64_t sample_key(uint64_t seed, uint64_t step, uint64_t sample) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ (step * 0xd1b54a32d192ed03ull));
  return mix64(h ^ (sample * 0xabc98388fb8fac03ull));
}

inline float element_uniform(uint64_t key, uint64_t element) {
  const uint64_t h = mix64(key ^ (element * 0x8cb92ba72f3d8dd7ull));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
}

// One sample: mask and y for its count elements.
MPLAN_VECTOR_CLONES void drop_sample(const float* __restrict x, float* __restrict y, uint8_t* __restrict mask,
                                     int64_t count, uint64_t key, float p, float scale) {
  for (int64_t e = 0; e < count; ++e) {
    const bool keep = element_uniform(key, static_cast<uint64_t>(e)) >= p;
    mask[e] = keep ? 1 : 0;
    y[e] = keep ? x[e] * scale : 0.0f;
  }
}

MPLAN_VECTOR_CLONES void drop_gradient(const uint8_t* __restrict mask, const float* __restrict dy,
                                       float* __restrict dx, int64_t count, float scale, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < count; ++i) dx[i] += mask[i] ? dy[i] * scale : 0.0f;
  } else {
    for (int64_t i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
  }
}

}  // namespace

float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element) {
  return element_uniform(sample_key(seed, step, sample), element);
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step) {
  OpTimer timer(OpKind::dropout);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t at = b * sample_elements;
    drop_sample(x + at, y + at, mask + at, sample_elements,
                sample_key(seed, step, static_cast<uint64_t>(first_sample + b)), p, scale);
  }
}

void dropout_backward(const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate) {
  OpTimer timer(OpKind::dropout);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  drop_gradient(mask, dy, dx, count, scale, accumulate);
}

}  // namespace mplan::rt::cpu
