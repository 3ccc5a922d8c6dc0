#pragma once
// The one plan search (docs/design.md, Planner): every policy's plan is the
// fastest feasible simulation among the candidates its paper allows --
// sub-batch sizes, workspace pools, placements and decider settings -- and
// the search fills the plan's header once. planner/planner.h plan_iteration
// is its entry point; docs/planner.md explains it.
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

// What a search starts from: the options and what plan_iteration checked
// and derived from them once.
struct SearchInput {
  const Tdfg& tdfg;
  const CostModel& cost;
  const PlanOptions& options;
  int64_t batch = 0;                  // >= 1: the options' batch, else the TDFG's
  int64_t resident_region_bytes = 0;  // resident_region_bytes(tdfg)
  // The budget less the resident region, aligned down: what the blocks may
  // use; <= 0 when the budget does not hold the resident weights.
  int64_t arena_bytes = 0;
};

// The plan of options.policy (plan_iteration's work, without the ideal's
// special budget): feasible, or infeasible with the reason (the budget, batch
// or sub-batch out of range, or no candidate fits).
PlanResult search_plan(const SearchInput& in);

// least_batchnorm_round (the least samples of a round): tdfg/bounds.h.

// Rounds of about b samples summing to `batch`: split_batch(batch, b), or,
// when its last round would hold fewer than `least_round` samples, as many
// rounds as evenly filled (sizes differing by at most one); empty when even
// that leaves a round below `least_round`.
std::vector<int64_t> rounds_for(int64_t batch, int64_t sub_batch, int64_t least_round);

}  // namespace mplan
