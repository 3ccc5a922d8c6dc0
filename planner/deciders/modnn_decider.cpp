// moDNN Algorithm 1 (moDNN §IV-B) as a Decider, with mplan's
// levers (ModnnRules): recomputation chosen by cost against offloading, early
// offloads sized by the round's excess, and the re-fetch cost that keeps
// prefetching from thrashing.

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "planner/deciders/compaction.h"
#include "planner/deciders/deciders.h"
#include "planner/deciders/offload_scheme.h"

namespace mplan {
namespace {

// How far ahead (tasks) ModnnRules::load_ahead looks for the next load.
constexpr int64_t kLoadAheadTasks = 256;

class ModnnDecider final : public Decider {
 public:
  explicit ModnnDecider(const ModnnRules& rules)
      : rules_(rules),
        finder_(SchemeCosts{rules.refetch_cost, rules.lookahead_tasks, rules.recompute}) {}

  bool defragment_on_failure() const override { return true; }
  bool defragment_around_task() const override { return rules_.defragment_around_task; }
  double last_gain_ms() const override { return gain_ms_; }

  void start_round(IterationSim& sim, int32_t r) override {
    early_bytes_ = 0;
    const bool early_drops = rules_.recompute && rules_.early_drop_ratio > 0;
    const int64_t excess = rules_.early_offload || early_drops ? excess_bytes(sim, r) : 0;
    early_target_bytes_ = rules_.early_offload ? excess : 0;
    drop_early_ = early_drops && excess > 0;
  }

  // Cheap blocks whose recomputation needs nothing kept longer than it is anyway.
  bool may_drop(const IterationSim& sim, BlockId b) override {
    if (choice(b) != BlockChoice::rules) return choice(b) == BlockChoice::drop;
    if (!rules_.recompute) return false;
    if (!rules_.recompute_convolutions)
      for (TaskId w : sim.tdfg().blocks[b].writers)
        if (sim.tdfg().tasks[w].has_algorithms) return false;
    return recompute_is_free_of_extensions(sim, b);
  }

  // §IV-B.1: the scheme of least cost; none when no run of segments can be
  // freed. With compaction: moving blocks on the device where that costs less.
  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& request) override {
    OffloadScheme scheme = finder_.find(sim, request);
    if (rules_.compaction) {
      const Compaction c = find_compaction(sim, request);
      if (c.found && (!scheme.found || c.delay_ms < scheme.delay_ms + scheme.future_ms))
        return apply_compaction(sim, c);
    }
    if (!scheme.found) return std::nullopt;
    return OffloadSchemeFinder::apply(sim, scheme);
  }

  size_t choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& options) override;
  void before_issue(IterationSim& sim, int32_t r, int32_t k, double task_ms) override;
  void after_task(IterationSim& sim, int32_t r, int32_t k) override;

 private:
  BlockChoice choice(BlockId b) const {
    return rules_.block_choices ? (*rules_.block_choices)[static_cast<size_t>(b)] : BlockChoice::rules;
  }
  static bool recompute_is_free_of_extensions(const IterationSim& sim, BlockId b);
  // The position of block b's next use after position k if a backward task
  // makes it, else -1 (none, or the forward pass reads it again).
  static int32_t next_backward_use(const IterationSim& sim, BlockId b, int32_t k);
  void drop_cheap_blocks(IterationSim& sim, int32_t r, int32_t k) const;
  void load_ahead(IterationSim& sim, double t_end_ms);
  void apply_block_choices(IterationSim& sim, int32_t r, int32_t k) const;
  int64_t excess_bytes(IterationSim& sim, int32_t r) const;
  // Missing inputs of the task at unrolled position p (loads and the loads
  // of recomputations), and the bytes the task needs in all.
  void missing_at(IterationSim& sim, int64_t p, std::vector<int32_t>* missing, int64_t* need_bytes) const;

  ModnnRules rules_;
  OffloadSchemeFinder finder_;
  double gain_ms_ = 0;
  int64_t early_bytes_ = 0;
  int64_t early_target_bytes_ = 0;
  bool drop_early_ = false;
  // load_ahead: the bytes loaded ahead at each position, beyond the profile.
  std::vector<int64_t> ahead_bytes_;
};

bool ModnnDecider::recompute_is_free_of_extensions(const IterationSim& sim, BlockId b) {
  const Tdfg& tdfg = sim.tdfg();
  const std::vector<int32_t>& ub = sim.uses(b);
  if (ub.empty()) return false;
  for (TaskId w : tdfg.blocks[b].writers) {
    for (BlockId x : tdfg.tasks[w].recompute_reads) {
      if (tdfg.blocks[x].resident || x == b) continue;
      const std::vector<int32_t>& ux = sim.uses(x);
      if (ux.empty() || ux.back() < ub.back()) return false;
    }
  }
  return true;
}

void ModnnDecider::missing_at(IterationSim& sim, int64_t p, std::vector<int32_t>* missing, int64_t* need_bytes) const {
  const auto r = static_cast<int32_t>(p / sim.task_count());
  const auto k = static_cast<int32_t>(p % sim.task_count());
  *need_bytes = 0;
  for (BlockId b : sim.inputs_at(k)) {
    const int32_t i = sim.instance(r, b);
    *need_bytes += sim.reserved_bytes(sim.instance_bytes(i));
    sim.missing_inputs(i, missing);
  }
  for (BlockId b : sim.outputs_at(k)) *need_bytes += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
}

// What early offloads must cover in round r: the round's liveness peak (every
// block from its first to its last use at this sub-batch, plus the workspace
// of each task's fastest option, the room Eq. 5 would like) less the arena,
// plus the margin; 0 when the round fits. The copies must also overlap the
// computation: no more than the copy engine moves out during the forward
// pass and back during the backward pass (the rest is left to eviction when
// room is needed, and to recomputation where that is on).
int64_t ModnnDecider::excess_bytes(IterationSim& sim, int32_t r) const {
  const Tdfg& tdfg = sim.tdfg();
  const int32_t n = sim.task_count();
  std::vector<int64_t> delta(n + 1, 0);
  int64_t largest_task = 0;
  double forward_ms = 0, backward_ms = 0;
  for (int32_t k = 0; k < n; ++k) {
    int64_t need = 0;
    for (BlockId b : sim.inputs_at(k)) need += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
    for (BlockId b : sim.outputs_at(k)) need += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
    largest_task = std::max(largest_task, need);
    const double ms = sim.fast_time(sim.pos(r, k));
    (tdfg.tasks[sim.task_at(k)].kind == TaskKind::FP ? forward_ms : backward_ms) += ms;
  }
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const std::vector<int32_t>& u = sim.uses(b);
    if (tdfg.blocks[b].resident || u.empty()) continue;
    const int64_t bytes = sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
    delta[u.front()] += bytes;
    delta[u.back() + 1] -= bytes;
  }
  int64_t live = 0, peak = 0;
  for (int32_t k = 0; k < n; ++k) {
    live += delta[k];
    const int64_t ws = rules_.select_algorithms ? sim.options_of(sim.task_at(k), r).front().workspace_bytes : 0;
    peak = std::max(peak, live + (ws > 0 ? sim.reserved_bytes(ws) : 0));
  }
  const int64_t excess = peak - sim.memory().capacity_bytes();
  if (excess <= 0) return 0;
  const double margin = rules_.early_offload_margin;
  // Bytes one copy direction moves in a millisecond (from a 64 MiB copy).
  const int64_t probe = int64_t{64} << 20;
  const double bytes_per_ms = static_cast<double>(probe) / sim.cost().device_to_host_ms(probe);
  const double overlap_ms = std::min(forward_ms, backward_ms);
  const auto movable = static_cast<int64_t>(bytes_per_ms * overlap_ms);
  return std::min(excess + static_cast<int64_t>(margin * static_cast<double>(largest_task)), movable);
}

// Algorithm 1 lines 9-14 and Eq. 5: gain = T_base - T_alg - T_off,alg -
// T_pre,alg(s), with T_base the leanest option, T_off the delay of the
// offloading its workspace forces (Fig. 3), and T_pre the delay of the
// prefetch for the nearest task s that needs one if the workspace leaves too
// little room to start it before t ends.
size_t ModnnDecider::choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& opts) {
  const TaskId t = sim.task_at(k);
  gain_ms_ = 0;
  size_t lean = 0;
  for (size_t i = 1; i < opts.size(); ++i)
    if (opts[i].workspace_bytes < opts[lean].workspace_bytes) lean = i;
  const bool select = rules_.select_algorithms && sim.tdfg().tasks[t].has_algorithms && opts.size() > 1;
  const bool pooled = sim.in_pool(t, r);
  const int64_t here = sim.here();
  const double now_ms = sim.timeline().free_at_ms(kComputeSlot);
  // The nearest later task needing a prefetch, its bytes and transfer time.
  int64_t prefetch_need = 0;
  double prefetch_ms = 0, gap_ms = 0;
  if (select && rules_.prefetch) {
    const int64_t last = std::min(sim.last_pos(), here + rules_.lookahead_tasks);
    for (int64_t p = here + 1; p <= last; ++p) {
      std::vector<int32_t> missing;
      int64_t need = 0;
      missing_at(sim, p, &missing, &need);
      for (int32_t i : missing) {
        prefetch_need += sim.reserved_bytes(sim.instance_bytes(i));
        prefetch_ms += sim.cost().host_to_device_ms(sim.instance_bytes(i));
      }
      if (prefetch_need > 0) break;
      gap_ms += sim.fast_time(p);
    }
  }
  double best_gain = -std::numeric_limits<double>::infinity();
  size_t best = opts.size();
  for (size_t i = 0; i < opts.size(); ++i) {
    if (!select && i != lean) continue;
    const TaskOption& o = opts[i];
    double off_ms = 0;
    if (pooled) {
      // The workspace lies in the wd pool: it displaces nothing.
    } else if (o.workspace_bytes > 0 && !sim.memory().fits(o.workspace_bytes)) {
      OffloadScheme s = finder_.find(sim, RoomRequest{o.workspace_bytes, kComputeSlot, here, RoomRequest::Purpose::workspace});
      if (!s.found) continue;
      off_ms = s.delay_ms + s.future_ms - (rules_.eq5_refetch ? 0.0 : s.refetch_ms);
    }
    double pre_ms = 0;
    if (!pooled && prefetch_need > 0 && o.workspace_bytes > 0 &&
        sim.memory().free_bytes() - sim.reserved_bytes(o.workspace_bytes) < prefetch_need) {
      // The prefetch waits for t to end: s is delayed by what does not
      // overlap the tasks between (t's own delay off_ms is counted once, above).
      const double t_end = now_ms + off_ms + o.time_ms;
      const double start = std::max(t_end, sim.timeline().free_at_ms(kH2dSlot));
      pre_ms = std::max(0.0, start + prefetch_ms - (t_end + gap_ms));
    }
    const double gain = opts[lean].time_ms - o.time_ms - off_ms - pre_ms;
    if (gain > best_gain) {
      best_gain = gain;
      best = i;
    }
  }
  if (best < opts.size() && select) gain_ms_ = best_gain;
  return best;
}

// Algorithm 1 lines 15-27: for the next tasks s, prefetch the inputs that are
// on the host when starting after t would delay s (Eq. 4); stop at the first
// s that need not start now, that would not fit beside t (line 16, predicted
// by comparing its need and t's with the arena), or for which no room can be
// made without touching blocks needed up to s.
//
// mplan (ModnnRules::queued_prefetch): the copies queue on one stream, so a
// later task's prefetch starts only after the earlier ones; Eq. 4 is asked of
// each s with the transfers of every s before it, and all prefetches up to
// the last s that must start now are issued (moDNN stops at the first s that
// need not start, even when a later, larger one must).
void ModnnDecider::before_issue(IterationSim& sim, int32_t r, int32_t k, double task_ms) {
  if (rules_.load_ahead) load_ahead(sim, sim.timeline().free_at_ms(kComputeSlot) + task_ms);
  if (!rules_.prefetch) return;
  const int64_t here = sim.here();
  int64_t t_need = 0;
  for (BlockId b : sim.inputs_at(k)) t_need += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
  for (BlockId b : sim.outputs_at(k)) t_need += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
  const double t_end_ms = sim.timeline().free_at_ms(kComputeSlot) + task_ms;
  const double start_ms = std::max(t_end_ms, sim.timeline().free_at_ms(sim.timeline().h2d_slot()));
  double est_ms = t_end_ms;  // EST(s), from the fastest options of the tasks between
  double queued_ms = 0;      // transfers of the s before, in the queue
  const int64_t last = std::min(sim.last_pos(), here + rules_.lookahead_tasks);
  std::vector<std::pair<int64_t, std::vector<int32_t>>> pending;  // (s, its missing inputs)
  size_t urgent = 0;  // prefetches for pending[0, urgent) must start now
  for (int64_t p = here + 1; p <= last; ++p) {
    std::vector<int32_t> missing;
    int64_t s_need = 0;
    missing_at(sim, p, &missing, &s_need);
    if (s_need + t_need > sim.memory().capacity_bytes()) break;  // line 16
    if (!missing.empty()) {
      double trans_ms = 0;
      for (int32_t i : missing) trans_ms += sim.cost().host_to_device_ms(sim.instance_bytes(i));
      queued_ms += trans_ms;
      pending.emplace_back(p, std::move(missing));
      // Eq. 4: T + Talg(t) + sum Ttrans(d) > EST(s) -> start now.
      const bool now = start_ms + (rules_.queued_prefetch ? queued_ms : trans_ms) > est_ms;
      if (now) urgent = pending.size();
      else if (!rules_.queued_prefetch) break;  // lines 26-27
    }
    est_ms += sim.fast_time(p);
  }
  for (size_t j = 0; j < urgent; ++j) {
    for (int32_t i : pending[j].second) {
      if (sim.state(i).buffer != kNoBuffer) continue;
      if (!sim.load(i, RoomRequest{sim.instance_bytes(i), sim.timeline().h2d_slot(), pending[j].first,
                                   RoomRequest::Purpose::prefetch}))
        return;  // lines 21-25
    }
  }
}

// ModnnRules::load_ahead: the inputs on the host of the next task that has
// any, once Eq. 4 with the copy queue says they must start (their copies and
// those of the tasks after it no longer fit before the task starts), the
// copy engine in is idle by the end of the running task, and their bytes fit
// beside the profile from here up to that task (and in one free range now),
// so that nothing the earlier simulation placed in between loses its room;
// never by evicting. One task's inputs at a time, in the order of need.
void ModnnDecider::load_ahead(IterationSim& sim, double t_end_ms) {
  const std::vector<int64_t>& in_use = *rules_.load_ahead;
  const int64_t here = sim.here();
  if (in_use.size() != static_cast<size_t>(sim.last_pos() + 1)) return;  // another plan's profile
  if (ahead_bytes_.empty()) ahead_bytes_.assign(in_use.size(), 0);
  if (sim.timeline().free_at_ms(sim.timeline().h2d_slot()) > t_end_ms) return;
  // Eq. 4 with the copy queue: the loads of the next tasks in order, until
  // one must start now (EST from the fastest options: recomputations left
  // out, so it errs early).
  const int64_t last = std::min(sim.last_pos(), here + kLoadAheadTasks);
  double est_ms = t_end_ms, queued_ms = 0;
  int64_t first = -1;
  std::vector<int32_t> first_missing;
  bool urgent = false;
  std::vector<int32_t> counted;  // instances whose copies queued_ms holds
  for (int64_t p = here + 1; p <= last && !urgent; ++p) {
    std::vector<int32_t> missing;
    int64_t need = 0;
    missing_at(sim, p, &missing, &need);
    for (int32_t i : missing)
      if (std::find(counted.begin(), counted.end(), i) == counted.end()) {
        counted.push_back(i);
        queued_ms += sim.cost().host_to_device_ms(sim.instance_bytes(i));
      }
    if (!missing.empty() && first < 0) {
      first = p;
      first_missing = std::move(missing);
    }
    urgent = first >= 0 && t_end_ms + queued_ms > est_ms;
    est_ms += sim.fast_time(p);
  }
  if (!urgent) return;
  const int64_t capacity = sim.memory().capacity_bytes();
  int64_t margin = 0;  // ModnnRules::load_ahead_margin: the largest block made in between
  for (int64_t q = here; q < first && rules_.load_ahead_margin; ++q) {
    const auto rq = static_cast<int32_t>(q / sim.task_count());
    const auto kq = static_cast<int32_t>(q % sim.task_count());
    for (BlockId b : sim.outputs_at(kq))
      margin = std::max(margin, sim.reserved_bytes(sim.instance_bytes(sim.instance(rq, b))));
  }
  for (int32_t i : first_missing) {
    if (sim.state(i).buffer != kNoBuffer) continue;
    const int64_t bytes = sim.reserved_bytes(sim.instance_bytes(i));
    for (int64_t q = here; q < first; ++q)
      if (in_use[q] + ahead_bytes_[q] + bytes + margin > capacity) return;
    const RoomRequest request{sim.instance_bytes(i), sim.timeline().h2d_slot(), first,
                              RoomRequest::Purpose::prefetch};
    if (!sim.memory().fits(request.bytes)) {
      // Compaction: the bytes fit beside the profile, one range does not.
      if (sim.memory().free_bytes() >= sim.reserved_bytes(request.bytes)) sim.note_fragmented_allocation();
      if (!rules_.compaction) return;
      const Compaction c = find_compaction(sim, request);
      if (!c.found || c.delay_ms >= sim.cost().host_to_device_ms(request.bytes)) return;
      apply_compaction(sim, c);
    }
    if (!sim.load(i, request)) return;
    for (int64_t q = here; q < first; ++q) ahead_bytes_[q] += bytes;
  }
}

int32_t ModnnDecider::next_backward_use(const IterationSim& sim, BlockId b, int32_t k) {
  const std::vector<int32_t>& u = sim.uses(b);
  auto it = std::upper_bound(u.begin(), u.end(), k);
  if (it == u.end() || sim.tdfg().tasks[sim.task_at(*it)].kind == TaskKind::FP) return -1;
  return *it;
}

// Early drops: right after a block's last forward use, free it if it may be
// dropped and its recomputation is cheap against a copy. Under pressure the
// offload scheme frees whatever contiguous run costs least at that moment,
// often a block needed again soon; a cheap output dropped ahead leaves that
// room free for the whole forward pass (ResNet-50 at a third of its memory
// on the H200 profile: +33% without, +12% with a ratio of 0.2).
void ModnnDecider::drop_cheap_blocks(IterationSim& sim, int32_t r, int32_t k) const {
  for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
    for (BlockId b : *list) {
      const int32_t i = sim.instance(r, b);
      if (!sim.droppable(i) || next_backward_use(sim, b, k) < 0) continue;
      if (sim.recompute_ms(i) <= rules_.early_drop_ratio * sim.cost().device_to_host_ms(sim.instance_bytes(i)))
        sim.drop(i);
    }
  }
}

// Early offloads: right after a block's last forward use, while the round's
// excess is not yet covered, copy it out if only the backward pass needs it
// again, beyond the lookahead.
// The refinement's choices (ModnnRules::block_choices): right after a
// block's last forward use, drop or offload it as chosen.
void ModnnDecider::apply_block_choices(IterationSim& sim, int32_t r, int32_t k) const {
  for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
    for (BlockId b : *list) {
      const BlockChoice c = choice(b);
      if (c == BlockChoice::rules || next_backward_use(sim, b, k) < 0) continue;
      const int32_t i = sim.instance(r, b);
      const InstanceState& s = sim.state(i);
      if (s.buffer == kNoBuffer || !s.created) continue;
      if (c == BlockChoice::drop && sim.droppable(i)) sim.drop(i);
      else if (c == BlockChoice::offload && !sim.droppable(i)) sim.evict(i);
    }
  }
}

void ModnnDecider::after_task(IterationSim& sim, int32_t r, int32_t k) {
  if (sim.tdfg().tasks[sim.task_at(k)].kind != TaskKind::FP) return;
  if (rules_.block_choices) apply_block_choices(sim, r, k);
  if (drop_early_) drop_cheap_blocks(sim, r, k);
  for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
    for (BlockId b : *list) {
      if (early_bytes_ >= early_target_bytes_) return;
      const int32_t i = sim.instance(r, b);
      const InstanceState& s = sim.state(i);
      if (s.buffer == kNoBuffer || s.host_valid || !s.created || sim.droppable(i)) continue;
      const int32_t next = next_backward_use(sim, b, k);
      if (next < 0 || next - k <= rules_.lookahead_tasks) continue;
      sim.offload(i);
      early_bytes_ += sim.reserved_bytes(sim.instance_bytes(i));
    }
  }
}

}  // namespace

std::unique_ptr<Decider> make_modnn_decider(const ModnnRules& rules) { return std::make_unique<ModnnDecider>(rules); }

std::vector<int64_t> arena_in_use_by_position(const Plan& plan, int64_t pool_offset_bytes) {
  std::vector<int64_t> in_use;
  std::set<std::pair<TaskId, int32_t>> seen;  // (task, round): a micro-batched task has several steps
  int64_t live = 0, most = 0;
  auto counted = [&](const Step& s) {
    const Buffer& b = plan.buffers[static_cast<size_t>(s.buffer)];
    return b.resident || b.offset >= pool_offset_bytes ? 0 : align_up(b.bytes);
  };
  bool window_open = true;  // no allocation since the last compute step: frees still lower the window's start
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::alloc) {
      window_open = false;
      most = std::max(most, live += counted(s));
    }
    if (s.kind == StepKind::free) {
      live -= counted(s);
      if (window_open) most = live;
    }
    if (s.kind != StepKind::compute || s.recompute || s.round == kOnceRound) continue;
    if (seen.insert({s.task, s.round}).second) in_use.push_back(most);
    else in_use.back() = std::max(in_use.back(), most);
    most = live;
    window_open = true;
  }
  return in_use;
}

}  // namespace mplan
