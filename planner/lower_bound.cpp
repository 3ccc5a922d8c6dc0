#include "planner/lower_bound.h"

#include <algorithm>
#include <limits>

#include "planner/sub_batch.h"
#include "tdfg/bounds.h"

namespace mplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A round of `samples`: every task at its fastest option that fits the
// arena with the task's own blocks (ms; infinity when some task fits with
// none), and each task's leanest workspace.
struct RoundTasks {
  double ms = 0;
  std::vector<int64_t> lean_workspace;
};

RoundTasks round_tasks(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t samples) {
  RoundTasks out;
  out.lean_workspace.assign(tdfg.tasks.size(), 0);
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    double best = kInfinity;
    int64_t least = std::numeric_limits<int64_t>::max();
    for (const TaskOption& o : cost.options(tdfg, t, samples)) {
      least = std::min(least, o.workspace_bytes);
      if (task_arena_bytes(tdfg, t, samples, o.workspace_bytes) <= arena_bytes) best = std::min(best, o.time_ms);
    }
    out.lean_workspace[t] = least;
    if (t != tdfg.update_task) out.ms += best;
  }
  return out;
}

// The fewest milliseconds per byte a copy takes in each direction (the
// marginal cost of a large copy: the lines of the cost models have their
// latency on top), so that no set of copies of x bytes takes less than x
// times it.
double copy_ms_per_byte(const CostModel& cost, bool to_host) {
  const int64_t one = int64_t{1} << 30;
  const double a = to_host ? cost.device_to_host_ms(one) : cost.host_to_device_ms(one);
  const double b = to_host ? cost.device_to_host_ms(2 * one) : cost.host_to_device_ms(2 * one);
  return std::max(0.0, std::min(a, b - a)) / static_cast<double>(one);
}

// A block that could be away from the device at the round's fullest moment:
// its bytes, and the least it costs per byte to compute again (infinity for
// a block only copies can bring back: a gradient).
struct Removable {
  double recompute_ms_per_byte = kInfinity;
  int64_t bytes = 0;
};

// The bound on a round of `samples` that also counts memory: at the task
// where the blocks that must exist (written before, used after) with the
// leanest workspaces exceed the arena most, the excess E must be away from
// the device. Each byte away was copied out and back, on the copy engines
// within the round (its block is made and last used in it), or is computed
// again on the compute stream, for at least its cheapest forward writer's
// time (fractionally: a relaxation). So the round takes at least
// min over E_r of max(compute + recompute(E_r), copies(E - E_r)), or cannot
// fit at all when E exceeds what may leave. Blocks of the running task stay.
double round_with_memory_ms(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t samples,
                            const RoundTasks& round) {
  const double compute_ms = round.ms;
  std::vector<int64_t> live = liveness_profile(tdfg, samples, round.lean_workspace);
  // The resident blocks have their own region, not the arena; the input
  // data comes from the host anyway: neither counts.
  const int64_t resident = tdfg.resident_bytes();
  for (int64_t& bytes : live) bytes -= resident;
  for (BlockId b : {tdfg.input_block, tdfg.labels_block}) {
    if (b == kNoBlock || tdfg.blocks[b].readers.empty()) continue;
    for (TaskId t = 0; t <= tdfg.blocks[b].readers.back(); ++t) live[t] -= tdfg.blocks[b].bytes(samples);
  }
  const TaskId fullest = static_cast<TaskId>(std::max_element(live.begin(), live.end()) - live.begin());
  const int64_t excess = live[fullest] - arena_bytes;
  if (excess <= 0) return compute_ms;

  std::vector<Removable> removable;
  int64_t removable_bytes = 0;
  const Task& running = tdfg.tasks[fullest];
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || block.writers.empty() || b == tdfg.input_block || b == tdfg.labels_block) continue;
    const TaskId last_use = std::max(block.writers.back(), block.readers.empty() ? 0 : block.readers.back());
    if (block.writers.front() >= fullest || last_use <= fullest) continue;
    if (std::count(running.reads.begin(), running.reads.end(), b) ||
        std::count(running.writes.begin(), running.writes.end(), b))
      continue;
    Removable r;
    r.bytes = block.bytes(samples);
    if (r.bytes <= 0) continue;
    // Its content again: every forward writer in turn (an in-place ReLU
    // rewrites the convolution's output, so both run again).
    double rerun_ms = 0;
    bool forward = true;
    for (TaskId w : block.writers) {
      if (tdfg.tasks[w].kind != TaskKind::FP) forward = false;
      rerun_ms += fastest_option(cost, tdfg, w, samples).time_ms;
    }
    if (forward) r.recompute_ms_per_byte = rerun_ms / static_cast<double>(r.bytes);
    removable.push_back(r);
    removable_bytes += r.bytes;
  }
  if (removable_bytes < excess) return kInfinity;  // not even with everything away

  // Recomputation, cheapest per byte first: recompute_ms(x) is convex.
  std::sort(removable.begin(), removable.end(),
            [](const Removable& a, const Removable& b) { return a.recompute_ms_per_byte < b.recompute_ms_per_byte; });
  double recomputable = 0;
  for (const Removable& r : removable)
    if (r.recompute_ms_per_byte < kInfinity) recomputable += static_cast<double>(r.bytes);
  auto recompute_ms = [&](double bytes) {
    double ms = 0;
    for (const Removable& r : removable) {
      if (bytes <= 0 || r.recompute_ms_per_byte == kInfinity) break;
      const double take = std::min(bytes, static_cast<double>(r.bytes));
      ms += take * r.recompute_ms_per_byte;
      bytes -= take;
    }
    return ms;
  };
  const double out_rate = copy_ms_per_byte(cost, true), in_rate = copy_ms_per_byte(cost, false);
  const double copy_rate = cost.copy_engines() >= 2 ? std::max(out_rate, in_rate) : out_rate + in_rate;
  const double need = static_cast<double>(excess);
  auto round_at = [&](double recomputed) {
    return std::max(compute_ms + recompute_ms(recomputed), copy_rate * (need - recomputed));
  };
  // The max of a rising and a falling function: least where they cross.
  double low = 0, high = std::min(need, recomputable);  // any block may be copied
  for (int i = 0; i < 100 && high - low > 1.0; ++i) {
    const double mid = 0.5 * (low + high);
    if (compute_ms + recompute_ms(mid) < copy_rate * (need - mid)) low = mid;
    else high = mid;
  }
  return std::min(round_at(low), round_at(high));
}

// best[n]: the least time of rounds of at least `least` samples summing to
// n (an unbounded knapsack over the round times f); the split in `rounds`.
double best_split(const std::vector<double>& f, int64_t batch, int64_t least, std::vector<int64_t>* rounds) {
  std::vector<double> best(static_cast<size_t>(batch) + 1, kInfinity);
  std::vector<int64_t> last(static_cast<size_t>(batch) + 1, 0);
  best[0] = 0;
  for (int64_t n = 1; n <= batch; ++n)
    for (int64_t s = least; s <= n; ++s) {
      if (f[s] == kInfinity || best[n - s] == kInfinity) continue;
      if (best[n - s] + f[s] < best[n]) {
        best[n] = best[n - s] + f[s];
        last[n] = s;
      }
    }
  rounds->clear();
  if (best[batch] == kInfinity) return kInfinity;
  for (int64_t n = batch; n > 0; n -= last[n]) rounds->push_back(last[n]);
  return best[batch];
}

}  // namespace

IterationLowerBound iteration_lower_bound(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes,
                                          int64_t batch, int64_t least_round) {
  IterationLowerBound out;
  least_round = std::max<int64_t>(1, least_round);
  if (batch < least_round) return out;
  // Per round size (every size: what fits need not be monotone in the
  // samples, as a fast option's workspace is not).
  std::vector<double> compute(static_cast<size_t>(batch) + 1, kInfinity), memory = compute;
  for (int64_t s = least_round; s <= batch; ++s) {
    const RoundTasks round = round_tasks(tdfg, cost, arena_bytes, s);
    compute[s] = round.ms;
    if (compute[s] < kInfinity) memory[s] = round_with_memory_ms(tdfg, cost, arena_bytes, s, round);
  }
  std::vector<int64_t> compute_rounds;
  const double compute_ms = best_split(compute, batch, least_round, &compute_rounds);
  const double ms = best_split(memory, batch, least_round, &out.rounds);
  if (ms == kInfinity) return out;
  const double update =
      tdfg.update_task != kNoTask ? fastest_option(cost, tdfg, tdfg.update_task, batch).time_ms : 0.0;
  out.found = true;
  out.ms = ms + update;
  out.compute_ms = compute_ms + update;
  return out;
}

}  // namespace mplan
