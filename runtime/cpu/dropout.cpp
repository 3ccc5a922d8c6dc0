// Dropout with a counter-based mask (runtime/dropout_hash.h): the decision for
// an element does not depend on how the batch is divided into sub-batches.

#include "runtime/cpu/kernels.h"
#include "runtime/dropout_hash.h"

namespace mplan::rt::cpu {

float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element) {
  return dropout_hash_uniform(seed, step, sample, element);
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

}  // namespace mplan::rt::cpu
