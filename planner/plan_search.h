#pragma once
// The one plan search (DESIGN.md, revisions): every policy's plan is the
// fastest feasible simulation among the candidates its paper allows --
// sub-batch sizes, workspace pools, placements and decider settings -- and
// the search fills the plan's header once. planner/policy.h and
// planner/planner.h are its entry points; docs/planner.md explains it.
//
// mplan's search, in order:
//  1. checks (Eq. 2's minimum, the batch, the sub-batch, batchnorm's two
//     values per channel);
//  2. the sub-batch candidates (planner/sub_batch.h): for a batchnorm model
//     the whole batch first, split only when no plan of one round fits;
//  3. per candidate, mplan's decider with every lever on; where that plan
//     had to evict anything, the variants (no recomputation, no early
//     offloads, neither, on-demand loading instead of prefetching, large
//     blocks stacked from the top of the arena), each abandoned as soon as it
//     cannot beat the best so far;
//  4. the fastest plan; ties: fewer rounds, then the earlier candidate.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "planner/policy.h"
#include "planner/sim/iteration_sim.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct SearchResult {
  Plan plan;                           // header and summary filled
  std::string note;                    // what was chosen, for compile's output and compare's notes
  int32_t recomputed_tasks = 0;
  std::vector<int32_t> recompute_steps;
  std::vector<BlockId> offloaded_blocks;
  WorkspaceReport workspace_report;
  int32_t simulations = 0;             // iterations simulated, abandoned ones included
};

// The plan of `policy` (run_policy's work, without the ideal's special
// budget). Errors: the budget, batch or sub-batch are out of range, or no
// candidate is feasible (the message says why).
Result<SearchResult> search_plan(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                 const PlanOptions& options);

// least_batchnorm_round (the least samples of a round): tdfg/bounds.h.

// Rounds of about b samples summing to `batch`: split_batch(batch, b), or,
// when its last round would hold fewer than `least_round` samples, as many
// rounds as evenly filled (sizes differing by at most one); empty when even
// that leaves a round below `least_round`.
std::vector<int64_t> rounds_for(int64_t batch, int64_t sub_batch, int64_t least_round);

}  // namespace mplan
