#pragma once
// How much of each tensor a kernel call touches, from its size arguments (the
// operand extents of runtime/kernels.def, runtime/kernel_extents.h), so the
// kernel profiler refuses a job whose slots are too small for its calls (a
// hand-edited or hostile job file) instead of running a kernel out of bounds.
// runtime/jobs.h's parse_jobs checks argument kinds; this checks sizes.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernel_call.h"

namespace mplan::kernel_profiler {

// Why the call does not fit its slots ("argument 3 of conv_forward reads
// 3,211,264 bytes from slot 0 at offset 0; the slot has 1,024"), or a size
// that no kernel takes (a negative count, a pooling window larger than its
// padded input); "" when it fits. The call must pass rt::check_kernel_call.
// `bindings` gives the values of variables (first_sample).
std::string check_call_extents(const rt::KernelCall& call, const std::vector<int64_t>& slot_bytes,
                               const rt::Bindings& bindings);

}  // namespace mplan::kernel_profiler
