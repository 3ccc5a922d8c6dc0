// The parts of the generated program's fixed code that only 16-bit programs
// use (runtime/program.h, docs/generated-program.md "16-bit programs"): the
// weight copies made at start-up, and fp16's dynamic loss scaling before the
// update. Through runtime/device.h only, like the rest of runtime/program.cpp.

#include <cstring>
#include <vector>

#include "runtime/check.h"
#include "runtime/program.h"
#include "runtime/sixteen_bit.h"

namespace mplan::rt {

std::vector<float> Program::read_floats(int64_t offset, int64_t count, int64_t type) const {
  std::vector<float> values(static_cast<size_t>(count));
  if (count == 0) return values;
  if (type == static_cast<int64_t>(StorageType::float32)) {
    copy_to_host(values.data(), bytes(offset), values.size() * sizeof(float));
    return values;
  }
  std::vector<uint16_t> half(static_cast<size_t>(count));
  copy_to_host(half.data(), bytes(offset), half.size() * sizeof(uint16_t));
  if (type == static_cast<int64_t>(StorageType::bfloat16))
    from_bfloat16(half.data(), values.data(), count);
  else
    from_float16(half.data(), values.data(), count);
  return values;
}

void Program::make_weight_copies() {
  stream_synchronize(compute_stream_);
  for (int32_t i = 0; i < spec_.weight_copy_count; ++i) {
    const WeightCopy& copy = spec_.weight_copies[i];
    MPLAN_RT_CHECK(copy.type == static_cast<int64_t>(StorageType::bfloat16) ||
                       copy.type == static_cast<int64_t>(StorageType::float16),
                   "a weight copy that is not 16-bit");
    const std::vector<float> master = read_floats(copy.master_offset, copy.count, 0);
    std::vector<uint16_t> half(master.size());
    if (copy.type == static_cast<int64_t>(StorageType::bfloat16))
      to_bfloat16(master.data(), half.data(), copy.count);
    else
      to_float16(master.data(), half.data(), copy.count);
    if (!half.empty()) copy_to_device(bytes(copy.copy_offset), half.data(), half.size() * sizeof(uint16_t));
  }
}


}  // namespace mplan::rt
