#include "planner/lower_bound.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "planner/microbatch/batch_size_policy.h"
#include "planner/plan.h"
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
  std::vector<double> task_ms;  // per task (the update's 0: it is not in a round)
  std::vector<int64_t> lean_workspace;
  // Per block, the least time to make its content again: every forward
  // writer in turn (an in-place ReLU rewrites the convolution's output, so
  // both run again); infinity for a block a backward task writes.
  std::vector<double> rerun_ms;
};

// The options of a task with algorithms at the micro-batch sizes a plan may
// split it into (mu-cuDNN's powerOfTwo, planner/sim/dynamic_options.h), per
// (task, size), read once for every round size.
class MicroOptions {
 public:
  MicroOptions(const Tdfg& tdfg, const CostModel& cost) : tdfg_(tdfg), cost_(cost) {}
  const std::vector<TaskOption>& at(TaskId t, int64_t m) {
    auto it = options_.find({t, m});
    if (it == options_.end()) it = options_.emplace(std::make_pair(t, m), cost_.options(tdfg_, t, m)).first;
    return it->second;
  }

 private:
  const Tdfg& tdfg_;
  const CostModel& cost_;
  std::map<std::pair<TaskId, int64_t>, std::vector<TaskOption>> options_;
};

// The least time task t takes on `samples` with a workspace of at most
// `workspace_limit` bytes (aligned), undivided or as micro-batches of powerOfTwo
// sizes (the dynamic workspace mode): no split of the samples into
// micro-batches of sizes m_i takes less than the least time per sample of
// any size times the samples (a relaxation of mu-cuDNN's WR programme,
// §III-B); infinity when nothing fits. `lean` gets the least workspace of
// any option or micro-batch.
double least_task_ms(const Tdfg& tdfg, const CostModel& cost, MicroOptions& micro, TaskId t, int64_t samples,
                     int64_t workspace_limit, int64_t* lean) {
  const auto fits = [&](int64_t workspace) { return (workspace > 0 ? align_up(workspace) : 0) <= workspace_limit; };
  double best = kInfinity;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const TaskOption& o : cost.options(tdfg, t, samples)) {
    least = std::min(least, o.workspace_bytes);
    if (fits(o.workspace_bytes)) best = std::min(best, o.time_ms);
  }
  if (tdfg.tasks[t].has_algorithms && samples > 1 && t != tdfg.update_task) {
    double per_sample = kInfinity;
    for (int64_t m : microbatch::micro_batch_sizes(microbatch::BatchSizePolicy::power_of_two, samples)) {
      if (m >= samples) continue;
      for (const TaskOption& o : micro.at(t, m)) {
        least = std::min(least, o.workspace_bytes);
        if (fits(o.workspace_bytes)) per_sample = std::min(per_sample, o.time_ms / static_cast<double>(m));
      }
    }
    if (per_sample < kInfinity) best = std::min(best, per_sample * static_cast<double>(samples));
  }
  if (lean != nullptr) *lean = least;
  return best;
}

RoundTasks round_tasks(const Tdfg& tdfg, const CostModel& cost, MicroOptions& micro, int64_t arena_bytes,
                       int64_t samples) {
  RoundTasks out;
  out.lean_workspace.assign(tdfg.tasks.size(), 0);
  out.task_ms.assign(tdfg.tasks.size(), 0.0);
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    // The workspace that fits the arena beside the task's own blocks.
    const int64_t limit = arena_bytes - task_arena_bytes(tdfg, t, samples, 0);
    const double best = least_task_ms(tdfg, cost, micro, t, samples, limit, &out.lean_workspace[t]);
    if (t == tdfg.update_task) continue;
    out.task_ms[t] = best;
    out.ms += best;
  }
  out.rerun_ms.assign(tdfg.blocks.size(), kInfinity);
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || block.writers.empty()) continue;
    double ms = 0;
    for (TaskId w : block.writers) {
      if (tdfg.tasks[w].kind != TaskKind::FP) {
        ms = kInfinity;
        break;
      }
      // Run again at its fastest, as a recomputation (CostModel::recompute_ms).
      const double first_ms =
          least_task_ms(tdfg, cost, micro, w, samples, std::numeric_limits<int64_t>::max(), nullptr);
      ms += cost.recompute_ms(tdfg, w, samples, TaskOption{"", first_ms, 0});
    }
    out.rerun_ms[b] = ms;
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

// The bound on a round of `samples` that also counts memory, at a task f:
// where the blocks that must exist while f runs (written before, used after,
// and f's own, with the leanest workspaces) exceed the arena by E, E must be
// away from the device while f runs. Each byte away was copied out before f
// starts (on the device-to-host engine, after the round began: the round's
// tasks before f take at least their time too, `before_ms`) and back after
// (within the round: its block is made and last used in it), or is computed
// again after f
// starts, on the compute stream, for at least its cheapest forward writer's
// time (fractionally: a relaxation). So with E_c bytes copied and E_r
// computed again, the round takes at least
//   max(compute before f, E_c x out) + max(compute from f + recompute(E_r), E_c x in)
// (the two windows do not overlap, so it holds on one copy engine too), and
// cannot fit at all when E exceeds what may leave. Blocks of f stay.
double round_at_task_ms(const Tdfg& tdfg, const CostModel& cost, int64_t samples, const RoundTasks& round, TaskId f,
                        double before_ms, int64_t excess) {
  const double compute_ms = round.ms;
  std::vector<Removable> removable;
  int64_t removable_bytes = 0;
  const Task& running = tdfg.tasks[f];
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || block.writers.empty() || b == tdfg.input_block || b == tdfg.labels_block) continue;
    const TaskId last_use = std::max(block.writers.back(), block.readers.empty() ? 0 : block.readers.back());
    if (block.writers.front() >= f || last_use <= f) continue;
    if (std::count(running.reads.begin(), running.reads.end(), b) ||
        std::count(running.writes.begin(), running.writes.end(), b))
      continue;
    Removable r;
    r.bytes = block.bytes(samples);
    if (r.bytes <= 0) continue;
    if (round.rerun_ms[b] < kInfinity) r.recompute_ms_per_byte = round.rerun_ms[b] / static_cast<double>(r.bytes);
    removable.push_back(r);
    removable_bytes += r.bytes;
  }
  if (removable_bytes < excess) return kInfinity;  // not even with everything away

  // Recomputation, cheapest per byte first: recompute_ms(x) is convex.
  std::sort(removable.begin(), removable.end(),
            [](const Removable& a, const Removable& b) { return a.recompute_ms_per_byte < b.recompute_ms_per_byte; });
  // Prefix sums over the recomputable blocks: bytes and milliseconds.
  std::vector<double> bytes_upto{0}, ms_upto{0};
  for (const Removable& r : removable) {
    if (r.recompute_ms_per_byte == kInfinity) break;
    bytes_upto.push_back(bytes_upto.back() + static_cast<double>(r.bytes));
    ms_upto.push_back(ms_upto.back() + static_cast<double>(r.bytes) * r.recompute_ms_per_byte);
  }
  const double recomputable = bytes_upto.back();
  auto recompute_ms = [&](double bytes) {
    if (bytes <= 0) return 0.0;
    const size_t i = static_cast<size_t>(std::upper_bound(bytes_upto.begin(), bytes_upto.end(), bytes) -
                                         bytes_upto.begin());  // bytes_upto[i - 1] <= bytes
    if (i >= bytes_upto.size()) return ms_upto.back();
    return ms_upto[i - 1] + (bytes - bytes_upto[i - 1]) * removable[i - 1].recompute_ms_per_byte;
  };
  const double out_rate = copy_ms_per_byte(cost, true), in_rate = copy_ms_per_byte(cost, false);
  const double from_ms = compute_ms - before_ms;
  const double need = static_cast<double>(excess);
  auto round_at = [&](double recomputed) {
    const double copied = need - recomputed;
    return std::max(before_ms, out_rate * copied) + std::max(from_ms + recompute_ms(recomputed), in_rate * copied);
  };
  // Convex in the bytes recomputed (a sum of maxima of convex pieces), so a
  // ternary search finds its least value.
  double low = 0, high = std::min(need, recomputable);  // any block may be copied
  for (int i = 0; i < 200 && high - low > 1.0; ++i) {
    const double a = low + (high - low) / 3, b = high - (high - low) / 3;
    if (round_at(a) <= round_at(b)) high = b;
    else low = a;
  }
  return std::min({round_at(low), round_at(high), round_at(0), round_at(std::min(need, recomputable))});
}

// Tasks at which the bound is taken besides the fullest: the ones whose
// excess leaves least time to copy it out (the most bytes beyond what the
// device-to-host engine moves during the tasks before them).
constexpr size_t kBoundTasks = 8;

double round_with_memory_ms(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t samples,
                            const RoundTasks& round) {
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
  if (live[fullest] <= arena_bytes) return round.ms;
  // Every task whose blocks exceed the arena gives a bound; the fullest and
  // those that leave least time to copy the excess out are taken.
  const double out_rate = copy_ms_per_byte(cost, true);
  std::vector<double> before_ms(live.size() + 1, 0.0);  // before_ms[t]: the round's tasks before t, at their fastest
  for (size_t t = 0; t < live.size(); ++t) before_ms[t + 1] = before_ms[t] + round.task_ms[t];
  std::vector<std::pair<double, TaskId>> late;  // (bytes the engine cannot have moved out by then, task)
  for (TaskId t = 0; t < static_cast<TaskId>(live.size()); ++t)
    if (live[t] > arena_bytes && t != fullest)
      late.emplace_back(static_cast<double>(live[t] - arena_bytes) - (out_rate > 0 ? before_ms[t] / out_rate : 0.0), t);
  const size_t keep = std::min(kBoundTasks, late.size());
  std::partial_sort(late.begin(), late.begin() + static_cast<std::ptrdiff_t>(keep), late.end(), std::greater<>());
  auto at = [&](TaskId f) {
    return round_at_task_ms(tdfg, cost, samples, round, f, before_ms[f], live[f] - arena_bytes);
  };
  double ms = at(fullest);
  for (size_t i = 0; i < keep && ms < kInfinity; ++i) ms = std::max(ms, at(late[i].second));
  return ms;
}

// best[n]: the least time of rounds of at least `least` samples summing to
// n (an unbounded knapsack over the round times f), for every n up to the
// batch; last[n]: the size of one round of that split.
struct Splits {
  std::vector<double> best;
  std::vector<int64_t> last;
  // The rounds of the best split of n.
  std::vector<int64_t> rounds(int64_t n) const {
    std::vector<int64_t> out;
    for (; n > 0; n -= last[n]) out.push_back(last[n]);
    return out;
  }
};

Splits best_splits(const std::vector<double>& f, int64_t batch, int64_t least) {
  Splits out;
  out.best.assign(static_cast<size_t>(batch) + 1, kInfinity);
  out.last.assign(static_cast<size_t>(batch) + 1, 0);
  out.best[0] = 0;
  for (int64_t n = 1; n <= batch; ++n)
    for (int64_t s = least; s <= n; ++s) {
      if (f[s] == kInfinity || out.best[n - s] == kInfinity) continue;
      if (out.best[n - s] + f[s] < out.best[n]) {
        out.best[n] = out.best[n - s] + f[s];
        out.last[n] = s;
      }
    }
  return out;
}

// Before the first task of an iteration can run, what it reads from the host
// (the model's input) must be copied in: a plan's first round starts with
// that copy, on the host-to-device engine, and nothing else can run before
// its first task. The round of `samples` waits at least this long.
double first_input_ms(const Tdfg& tdfg, const CostModel& cost, int64_t samples) {
  if (tdfg.tasks.empty() || tdfg.update_task == 0) return 0;
  double ms = 0;
  std::vector<BlockId> seen;
  for (BlockId b : tdfg.tasks[0].reads) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || !block.writers.empty() || std::count(seen.begin(), seen.end(), b)) continue;
    seen.push_back(b);
    ms += cost.host_to_device_ms(block.bytes(samples));
  }
  return ms;
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
  MicroOptions micro(tdfg, cost);
  for (int64_t s = least_round; s <= batch; ++s) {
    const RoundTasks round = round_tasks(tdfg, cost, micro, arena_bytes, s);
    compute[s] = round.ms;
    if (compute[s] < kInfinity) memory[s] = round_with_memory_ms(tdfg, cost, arena_bytes, s, round);
  }
  const double compute_ms = best_splits(compute, batch, least_round).best[batch];
  // Any round of a split may come first: the best first round s with its
  // input's wait, then the best split of the rest.
  const Splits splits = best_splits(memory, batch, least_round);
  double ms = kInfinity;
  int64_t first = 0;
  double first_wait = 0;
  for (int64_t s = least_round; s <= batch; ++s) {
    if (memory[s] == kInfinity || splits.best[batch - s] == kInfinity) continue;
    const double wait = first_input_ms(tdfg, cost, s);
    if (wait + memory[s] + splits.best[batch - s] < ms) {
      ms = wait + memory[s] + splits.best[batch - s];
      first = s;
      first_wait = wait;
    }
  }
  if (ms == kInfinity) return out;
  const double update =
      tdfg.update_task != kNoTask ? fastest_option(cost, tdfg, tdfg.update_task, batch).time_ms : 0.0;
  out.found = true;
  out.ms = ms + update;
  out.compute_ms = compute_ms + update;
  out.input_ms = first_wait;
  out.rounds = splits.rounds(batch - first);
  out.rounds.insert(out.rounds.begin(), first);
  return out;
}

}  // namespace mplan
