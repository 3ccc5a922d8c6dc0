// Small vectorised loops shared by the CPU ops.

#include "runtime/cpu/vector_ops.h"

#include <algorithm>

#include "runtime/cpu/vectorize.h"

namespace mplan::rt::cpu {
namespace {

MPLAN_VECTOR_CLONES float chunk_sum(const float* __restrict x, int64_t count) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    for (int64_t j = 0; j < 16; ++j) lanes[j] += x[i + j];
  for (int64_t j = 0; i + j < count; ++j) lanes[j] += x[i + j];
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

MPLAN_VECTOR_CLONES void set_or_add(float* __restrict y, int64_t count, float value, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < count; ++i) y[i] += value;
  } else {
    for (int64_t i = 0; i < count; ++i) y[i] = value;
  }
}

}  // namespace

double sum_f32(const float* x, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; i += 1024) sum += chunk_sum(x + i, std::min<int64_t>(1024, count - i));
  return sum;
}

void set_or_add_scalar(float* y, int64_t count, float value, bool accumulate) { set_or_add(y, count, value, accumulate); }

}  // namespace mplan::rt::cpu
