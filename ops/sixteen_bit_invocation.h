#pragma once
// The kernel calls a 16-bit task makes (docs/generated-program.md, "16-bit
// programs" and "16-bit kernels"), as data: each call of the op table's
// invocation bracketed by its casts (ops/sixteen_bit_casts.h), or, where
// asked and the call has one, its 16-bit form (ops/sixteen_bit_kernels.h).
// The profiler times these, so that a 16-bit task is measured as its
// program runs it; codegen prints the same sequence (codegen/emit_program.cpp
// compute_lines).

#include <cstdint>
#include <vector>

#include "ops/op_table.h"
#include "ops/sixteen_bit_casts.h"

namespace mplan {

struct CastInvocation {
  // `invocation`'s calls with their casts; its tensors, then one more slot
  // (TensorRole::cast_scratch) for the float and 16-bit scratch.
  Invocation invocation;
  int64_t scratch_bytes = 0;  // that slot's size
};

// `casts` are invocation_casts' for `invocation`; `low` the model's 16-bit
// type. Float32 inputs of a 16-bit kernel are rounded into the scratch; its
// results go there where they are not stored as they are.
CastInvocation with_casts(const Invocation& invocation, const std::vector<CallCasts>& casts,
                          bool sixteen_bit_kernels, DataType low);

}  // namespace mplan
