#pragma once
// A kernel call's operand extents: how many elements the kernel reads or
// writes through each pointer parameter, from its size arguments, and the
// sizes no kernel takes (a negative count, a pooling window larger than its
// padded input). Each kernel's extents are written beside its name in
// runtime/kernels.def; the standalone kernel profiler sizes and bounds-checks
// a job's slots with them (profiler/kernel_profiler/call_extents.h), so a
// hand-edited job file cannot make a kernel run out of bounds.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kernel_call.h"

namespace mplan::rt {

// An element count no slot holds: a product that overflowed or had a negative factor.
inline constexpr int64_t kTooManyElements = std::numeric_limits<int64_t>::max();

struct OperandExtents {
  std::vector<int64_t> elements;  // per parameter; -1: not a pointer
  std::vector<bool> optional;     // per parameter: may be a null pointer
  std::string error;              // a size no kernel takes; "" when the sizes are fine
};

// The extents of a call that passes check_kernel_call; `bindings` gives the
// values of its variables (first_sample), its slots are not read.
OperandExtents kernel_extents(const KernelCall& call, const Bindings& bindings);

}  // namespace mplan::rt
