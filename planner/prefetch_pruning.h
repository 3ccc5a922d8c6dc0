#pragma once
// The last pass over a simulated plan: prefetches that nothing reads.
//
// A block prefetched ahead of its use (moDNN Algorithm 1, lines 15-27) or
// loaded for a task whose first attempt did not fit can be evicted again
// before any step reads it: by a defragmentation (moDNN §IV-B.1: "offloading
// all data and then reloading required data"), which cannot tell that a
// block has just arrived. Its bytes crossed PCIe for nothing, and the block
// comes back by a second prefetch when it is needed. This pass removes every
// such prefetch with its buffer's alloc and free, and the waits on its event
// (nothing read the buffer, so nothing needed to be ordered after the copy),
// so that a plan never prefetches a block that it frees before a read.
// Simulated times are kept: the copies after it on its stream could only
// start earlier, so the plan's times stay an upper bound.

#include <cstdint>
#include <vector>

#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct PrunedPrefetches {
  int32_t removed = 0;                 // prefetches removed
  std::vector<int32_t> new_step_index;  // per step of the plan before: its index after, -1 if removed
};

// Removes every prefetch step whose buffer is freed before a compute step
// reads or writes it or an offload copies it, with the buffer's alloc and
// free steps, renumbering steps, buffers and events; recomputes the summary's
// copy counts and arena peaks from what is left.
PrunedPrefetches remove_unread_prefetches(Plan& plan, const Tdfg& tdfg);

}  // namespace mplan
