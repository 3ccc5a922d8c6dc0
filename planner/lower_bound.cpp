#include "planner/lower_bound.h"

#include <algorithm>
#include <limits>

#include "planner/sub_batch.h"

namespace mplan {
namespace {

// Every task of a round of `samples` at its fastest option that fits the
// arena with the task's own blocks; infinity when some task fits with none.
double round_ms(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t samples) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    if (t == tdfg.update_task) continue;
    double best = std::numeric_limits<double>::infinity();
    for (const TaskOption& o : cost.options(tdfg, t, samples))
      if (task_arena_bytes(tdfg, t, samples, o.workspace_bytes) <= arena_bytes) best = std::min(best, o.time_ms);
    ms += best;
  }
  return ms;
}

}  // namespace

IterationLowerBound iteration_lower_bound(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                          int64_t batch, int64_t least_round) {
  IterationLowerBound out;
  least_round = std::max<int64_t>(1, least_round);
  if (batch < least_round) return out;
  const double inf = std::numeric_limits<double>::infinity();
  // f[s]: a round of s samples (every size: what fits need not be monotone
  // in the samples, as a fast option's workspace is not).
  std::vector<double> f(static_cast<size_t>(batch) + 1, inf);
  for (int64_t s = least_round; s <= batch; ++s) f[s] = round_ms(tdfg, cost, arena_bytes, s);
  // best[n]: the least time of rounds summing to n (an unbounded knapsack).
  std::vector<double> best(static_cast<size_t>(batch) + 1, inf);
  std::vector<int64_t> last(static_cast<size_t>(batch) + 1, 0);
  best[0] = 0;
  for (int64_t n = 1; n <= batch; ++n)
    for (int64_t s = least_round; s <= n; ++s) {
      if (f[s] == inf || best[n - s] == inf) continue;
      if (best[n - s] + f[s] < best[n]) {
        best[n] = best[n - s] + f[s];
        last[n] = s;
      }
    }
  if (best[batch] == inf) return out;
  out.found = true;
  out.ms = best[batch];
  if (tdfg.update_task != kNoTask) out.ms += fastest_option(cost, tdfg, tdfg.update_task, batch).time_ms;
  for (int64_t n = batch; n > 0; n -= last[n]) out.rounds.push_back(last[n]);
  return out;
}

}  // namespace mplan
