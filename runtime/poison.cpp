#include "runtime/poison.h"

#include <cmath>
#include <cstring>

namespace mplan::rt {

bool is_poison(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits == kPoisonBits;
}

size_t count_poison(const float* data, size_t count) {
  size_t poisoned = 0;
  for (size_t i = 0; i < count; ++i) poisoned += is_poison(data[i]) ? 1 : 0;
  return poisoned;
}

size_t first_non_finite(const float* data, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(data[i])) return i;
  return count;
}

}  // namespace mplan::rt
