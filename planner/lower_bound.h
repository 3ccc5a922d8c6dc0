#pragma once
// A proven lower bound on the iteration time of any plan at a budget, within
// the cost model: the compute stream runs every task once per round (and
// recomputations on top), one at a time, each with an option whose
// workspace and blocks fit the arena beside it (undivided workspace mode);
// so no plan is faster than the best split of the batch into rounds that
// fit, each task at its fastest fitting option, nothing waiting. It knows
// nothing of copies or recomputation, so at a tight budget the plan's
// distance to it is mostly what memory costs (docs/planner.md, "The lower
// bound").

#include <cstdint>
#include <vector>

#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct IterationLowerBound {
  bool found = false;                // false: no round of any size fits the arena
  double ms = 0;
  std::vector<int64_t> rounds;       // the split that attains it
};

// Rounds of at least least_round samples (batch norm's two values per
// channel) summing to batch, none larger than a size whose largest task does
// not fit `arena_bytes` with its leanest option.
IterationLowerBound iteration_lower_bound(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                          int64_t batch, int64_t least_round);

}  // namespace mplan
