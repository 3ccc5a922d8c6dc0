#pragma once
// Sub-batch size selection (moDNN §IV-A): the memory a task needs at a
// sub-batch (Eq. 1), the minimum budget (Eq. 2), the starting sub-batch
// (Eq. 3) and the candidates the planner simulates.

#include <cstdint>
#include <vector>

#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

// Eq. 1 in arena terms: the aligned bytes of task t's distinct non-resident
// inputs and outputs at sub-batch b, plus its workspace (aligned, if any).
int64_t task_arena_bytes(const Tdfg& tdfg, TaskId t, int64_t sub_batch, int64_t workspace_bytes);

// The resident region: every resident block at its own aligned offset.
int64_t resident_region_bytes(const Tdfg& tdfg);

struct MinimumBudget {
  int64_t bytes = 0;            // resident region + the largest task need at b = 1
  TaskId task = kNoTask;        // the task that sets it
  int64_t task_bytes = 0;       // that task's arena need
};
// Eq. 2 (with the leanest option's workspace, zero for implicit GEMM): below
// this no plan exists.
MinimumBudget minimum_budget(const Tdfg& tdfg, const CostModel& cost);

// The largest task need at sub-batch b, with each task's fastest option
// (Eq. 3's Mmin(t, b)) or its leanest.
int64_t max_task_arena_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t sub_batch,
                             bool fastest);

// Eq. 3: the largest b in [1, batch] whose every task fits the arena with its
// fastest option (1 if none does).
int64_t eq3_sub_batch(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t batch);
// The largest b in [1, batch] whose every task fits with its leanest option (0 if none).
int64_t largest_feasible_sub_batch(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                   int64_t batch);

// Rounds of b samples, the last one smaller when b does not divide the batch:
// split_batch(128, 48) = {48, 48, 32}.
std::vector<int64_t> split_batch(int64_t batch, int64_t sub_batch);

// Sub-batch sizes worth simulating, from the Eq. 3 start b0 up to the largest
// feasible b_max (ascending, distinct): b0 and b_max; for every round count R
// from the fewest (ceil(B / b_max)) to twice that of b0, the balanced size
// ceil(B / R) and the largest size that still makes R rounds; the powers of
// two from b0 / 4 to b_max; b0 / 2 and b0 / 4. The simulated time depends
// mostly on the rounds and the memory pressure, not smoothly on b (ResNet-50
// at 4 GiB on the K40: 32 samples per round is 1.6% slower than 43, three
// balanced rounds), so every round count near the start is tried.
std::vector<int64_t> sub_batch_candidates(int64_t batch, int64_t eq3_start, int64_t largest_feasible);

}  // namespace mplan
