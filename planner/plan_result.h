#pragma once
// What planning one iteration gives: the one result type of the planner's
// entry point (planner/planner.h plan_iteration), of each candidate the plan
// search simulates and of one simulation (planner/sim/iteration_sim.h).

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "planner/plan.h"
#include "planner/policy.h"
#include "planner/workspace_mode.h"

namespace mplan {

// What the wd workspace modes decided besides the plan: the pool and the WD
// problem of the plan's rounds (for dump_wd_lp, `mplan compile --dump-lp`).
struct WorkspaceReport {
  int64_t pool_bytes = 0;     // 0 unless wd or wd_auto
  WdProblem wd_problem;       // empty unless wd or wd_auto
};

struct PlanResult {
  PolicyKind policy = PolicyKind::mplan;
  // A plan within the budget was made. The ideal always has its plan, with
  // its own (unlimited) budget: feasible says whether that fits the budget
  // asked for.
  bool feasible = false;
  // A simulation stopped once it could not beat the search's best (screening).
  bool abandoned = false;
  // Infeasible: why, naming the task, the bytes or the option out of range.
  // Feasible: what the policy chose (sub-batch, levers, vdnn-dyn's pass).
  std::string note;
  Plan plan;  // header and summary filled; empty when infeasible, but for the ideal's
  int32_t recomputed_tasks = 0;           // compute steps that re-run an FP task
  std::vector<int32_t> recompute_steps;   // indices of the recomputing compute steps
  std::vector<BlockId> offloaded_blocks;  // blocks copied to the host in round 0, each once
  // Time the tasks lost to options slower than their fastest (a workspace
  // that did not fit, or Eq. 5's penalties): where it is 0 and nothing was
  // evicted, other placements and levers cannot make the plan faster.
  double slower_options_ms = 0;
  // Allocations that found no free range long enough while the arena had
  // the bytes free: where compaction could have made the room.
  int32_t fragmented_allocations = 0;
  int32_t simulations = 0;  // iterations the search simulated, abandoned ones included
  double planner_ms = 0;    // wall time of plan_iteration
  WorkspaceReport workspace_report;  // mplan and modnn with a wd workspace mode

  // The iteration's simulated time; for the ideal, the sum of the fastest
  // options' times (moDNN §V: "accumulating all individual tasks' execution times").
  double iteration_ms() const;
  // The plan, or an Error of kind infeasible with the note.
  Result<Plan> take_plan() &&;
};

}  // namespace mplan
