#pragma once
// Small vectorised loops shared by the CPU ops (runtime/cpu/vectorize.h).

#include <cstdint>

namespace mplan::rt::cpu {

// The sum of count floats: float partial sums in 16 lanes over chunks of 1024,
// added in double (the same order on every CPU).
double sum_f32(const float* x, int64_t count);
// y[i] = value, or y[i] += value when accumulate.
void set_or_add_scalar(float* y, int64_t count, float value, bool accumulate);

}  // namespace mplan::rt::cpu
