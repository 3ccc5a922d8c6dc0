#include "planner/sub_batch.h"

#include <algorithm>
#include <set>

#include "planner/plan.h"

namespace mplan {

int64_t task_arena_bytes(const Tdfg& tdfg, TaskId t, int64_t sub_batch, int64_t workspace_bytes) {
  const Task& task = tdfg.tasks[t];
  std::vector<BlockId> blocks(task.reads);
  blocks.insert(blocks.end(), task.writes.begin(), task.writes.end());
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  int64_t bytes = 0;
  for (BlockId b : blocks) {
    const Block& block = tdfg.blocks[b];
    if (!block.resident) bytes += align_up(std::max<int64_t>(1, block.bytes(sub_batch)));
  }
  if (workspace_bytes > 0) bytes += align_up(workspace_bytes);
  return bytes;
}

int64_t resident_region_bytes(const Tdfg& tdfg) {
  int64_t bytes = 0;
  for (const Block& b : tdfg.blocks) {
    if (b.resident) bytes += align_up(std::max<int64_t>(1, b.bytes(1)));
  }
  return bytes;
}

MinimumBudget minimum_budget(const Tdfg& tdfg, const CostModel& cost) {
  MinimumBudget min;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    int64_t bytes = task_arena_bytes(tdfg, t, 1, leanest_option(cost, tdfg, t, 1).workspace_bytes);
    if (bytes > min.task_bytes) {
      min.task_bytes = bytes;
      min.task = t;
    }
  }
  min.bytes = resident_region_bytes(tdfg) + min.task_bytes;
  return min;
}

int64_t max_task_arena_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t sub_batch,
                             bool fastest) {
  int64_t most = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    TaskOption o = fastest ? fastest_option(cost, tdfg, t, sub_batch)
                           : leanest_option(cost, tdfg, t, sub_batch);
    most = std::max(most, task_arena_bytes(tdfg, t, sub_batch, o.workspace_bytes));
  }
  return most;
}

namespace {

// The largest task need at sub-batch b counting its blocks only (no
// workspace): monotone in b, a lower bound of max_task_arena_bytes.
int64_t max_task_block_bytes(const Tdfg& tdfg, int64_t sub_batch) {
  int64_t most = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    most = std::max(most, task_arena_bytes(tdfg, t, sub_batch, 0));
  return most;
}

// The largest b in [1, batch] with max_task_arena_bytes(b) <= arena (0 if
// none). The need with a chosen option's workspace is not monotone in b (the
// fastest algorithm, and so its workspace, changes with b: VGG-16 on the
// P100 fits at 39 but not at 29), so bisection on it is wrong. The blocks
// alone are monotone and a lower bound: bisect on them for the largest b
// that could fit, then scan down to the first b that does.
int64_t largest_fitting(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                        int64_t batch, bool fastest) {
  int64_t lo = 0, hi = batch;  // blocks fit at lo (0 trivially); find the largest
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (max_task_block_bytes(tdfg, mid) <= arena_bytes) lo = mid;
    else hi = mid - 1;
  }
  for (int64_t b = lo; b >= 1; --b)
    if (max_task_arena_bytes(tdfg, cost, b, fastest) <= arena_bytes) return b;
  return 0;
}

}  // namespace

int64_t eq3_sub_batch(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t batch) {
  // moDNN Eq. 3, b = (M - SW) / max_t Mmin(t, b) with the fastest algorithm's
  // workspace, iterated until it converges: the largest b whose every task
  // fits M - SW (the arena) with its fastest option.
  return std::max<int64_t>(1, largest_fitting(tdfg, cost, arena_bytes, batch, /*fastest=*/true));
}

int64_t largest_feasible_sub_batch(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                   int64_t batch) {
  return largest_fitting(tdfg, cost, arena_bytes, batch, /*fastest=*/false);
}

std::vector<int64_t> split_batch(int64_t batch, int64_t sub_batch) {
  std::vector<int64_t> rounds;
  for (int64_t left = batch; left > 0; left -= sub_batch) rounds.push_back(std::min(left, sub_batch));
  return rounds;
}

std::vector<int64_t> sub_batch_candidates(int64_t batch, int64_t eq3_start, int64_t largest_feasible) {
  const int64_t b0 = std::clamp<int64_t>(eq3_start, 1, batch);
  const int64_t bmax = std::clamp<int64_t>(largest_feasible, b0, batch);
  auto rounds_of = [batch](int64_t b) { return (batch + b - 1) / b; };
  std::set<int64_t> out = {b0, bmax, std::max<int64_t>(1, b0 / 2), std::max<int64_t>(1, b0 / 4)};
  const int64_t fewest = rounds_of(bmax);
  const int64_t most = std::min(batch, 2 * rounds_of(b0) + 1);
  for (int64_t r = fewest; r <= most; ++r) {
    const int64_t balanced = (batch + r - 1) / r;
    if (balanced <= bmax) out.insert(balanced);
    // The largest b with exactly r rounds: ceil(B / b) == r.
    const int64_t largest = r == 1 ? batch : (batch - 1) / (r - 1);
    if (largest <= bmax && largest >= 1 && rounds_of(largest) == r) out.insert(largest);
  }
  for (int64_t p = 1; p <= bmax; p *= 2)
    if (p >= b0 / 4) out.insert(p);
  return std::vector<int64_t>(out.begin(), out.end());
}

}  // namespace mplan
