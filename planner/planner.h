#pragma once
// The planner's entry point (DESIGN.md, Planner): picks the sub-batch size
// (moDNN §IV-A, Eq. 3 as the start, then the fastest simulated candidate) and
// schedules the iteration with moDNN Algorithm 1 (planner/scheduler.h).

#include <cstdint>

#include "frontend/error.h"
#include "planner/plan.h"
#include "planner/workspace_mode.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct PlanOptions {
  // Device memory the program may use, everything included; required (> 0).
  int64_t budget_bytes = 0;
  // The mini-batch B; 0: the model's batch (tdfg.model->batch).
  int64_t batch = 0;
  // 1: one copy stream shared by both directions (moDNN's StrmD); 2: one per
  // direction (current GPUs); 0: what the cost model's device has.
  int copy_engines = 0;
  // Fixed sub-batch size b (1..B); 0: choose (Eq. 3 start, then simulate candidates).
  int64_t sub_batch = 0;
  // Candidates simulated when choosing b, besides the Eq. 3 start: the
  // neighbouring powers of two and divisors of B down to this many.
  int max_sub_batch_candidates = 8;
  // Stop simulating a candidate once it cannot beat the best so far (true;
  // the same winner, faster), or simulate every candidate fully (false).
  bool screen_sub_batches = true;
  // Select conv algorithms by Eq. 5; false: always the leanest option.
  bool select_algorithms = true;
  // Prefetch ahead for future tasks (Algorithm 1 lines 15-27); false: load
  // offloaded inputs only when their task needs them (on demand).
  bool prefetch = true;
  // How far ahead (tasks) line 15's loop looks at most.
  int prefetch_lookahead_tasks = 64;
  // Placement: blocks of at least a 1/large_block_divisor of the arena stack
  // from its top and the rest from its bottom, so that holes left by small
  // blocks do not split the room large ones need; 0: plain best fit. VGG-16
  // at b = 64 in 4 GiB on the K40 (three 822 MB blocks per task in a 2.6 GB
  // arena) defragments 7 times with plain best fit, 4 times with 16, and no
  // row of bench/planner_bench got slower.
  int large_block_divisor = 16;
  // Workspace use of conv tasks (planner/workspace_mode.h): undivided (one
  // cuDNN call per task and round); dynamic: each conv task also chooses
  // among its desirable micro-batch configurations (mu-cuDNN §III-C1,
  // powerOfTwo sizes) by the gain of Eq. 5; wr: the WR optimum under the
  // per-kernel limit workspace_bytes (§III-B); wd: the WD ILP's division of a
  // pool of workspace_bytes reserved in the arena (§III-C); wd_auto: wd with
  // the pool size whose plan simulates fastest. The choice goes into
  // TaskChoice::micro_batches.
  using Workspace = WorkspaceUse;
  Workspace workspace = Workspace::undivided;
  int64_t workspace_bytes = 0;  // wr: per-kernel limit; wd: the pool
};

// Plans one training iteration of `tdfg` under `options`. Errors: a budget
// smaller than the minimum (the message gives the minimum, in bytes and human
// units, and the task that sets it), a batch or sub-batch out of range.
Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options);

// What the wd modes decided besides the plan: the pool and the WD problem of
// the plan's rounds (for dump_wd_lp, `mplan compile --dump-lp`).
struct WorkspaceReport {
  int64_t pool_bytes = 0;     // 0 unless wd or wd_auto
  WdProblem wd_problem;       // empty unless wd or wd_auto
};
// The same, filling `report` (may be null).
Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options,
                       WorkspaceReport* report);

}  // namespace mplan
