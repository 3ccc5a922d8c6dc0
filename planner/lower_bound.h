#pragma once
// A proven lower bound on the iteration time of any plan at a budget, within
// the cost model: the compute stream runs every task once per round (and
// recomputations on top), one at a time, each with an option whose
// workspace and blocks fit the arena beside it, or (a convolution in the
// workspace modes that micro-batch it, mu-cuDNN §III) as micro-batches of
// powerOfTwo sizes that each fit, which take at least the least time per
// sample of any such option times the samples; so no plan is faster than
// the best split of the batch into rounds that fit, each task at its
// fastest fitting option, nothing waiting but the first task for its input:
// an iteration starts with its data on the host, so the first round's first
// task waits for the copy of what it reads from there. It also
// counts memory: at each round's fullest moment what does not fit must be
// away, copied out and back or computed again, and the round takes at least
// the cheaper mix of the two (docs/planner.md, "The lower bound").

#include <cstdint>
#include <vector>

#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct IterationLowerBound {
  bool found = false;                // false: no round of any size fits the arena
  double ms = 0;                     // counting memory
  std::vector<int64_t> rounds;       // the split that attains it
  double compute_ms = 0;             // the compute stream alone: nothing copied or recomputed
  double input_ms = 0;               // in `ms`: the first task's wait for its input, in the first round of `rounds`
};

// Rounds of at least least_round samples (batch norm's two values per
// channel) summing to batch, none larger than a size whose largest task does
// not fit `arena_bytes` with its leanest option.
IterationLowerBound iteration_lower_bound(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                          int64_t batch, int64_t least_round);

}  // namespace mplan
