#include "planner/deciders/offload_scheme.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace mplan {

OffloadScheme OffloadSchemeFinder::find(IterationSim& sim, const RoomRequest& request) {
  const int64_t need = sim.reserved_bytes(request.bytes);
  const StreamTimeline& timeline = sim.timeline();
  const double writer_ready_ms = timeline.free_at_ms(request.writer_slot);
  const double d2h_free_ms = timeline.free_at_ms(timeline.d2h_slot());
  const int64_t here = sim.here();
  // The scan depends on the arena, the instances' states, the timeline and
  // the horizon only: calls with none of them changed share it.
  const bool fresh = scan_generation_ != sim.generation() || scan_steps_ != timeline.steps().size() ||
                     scan_horizon_ != request.horizon || scan_pos_ != here;
  if (fresh) {
    scan_.clear();
    for (const auto& [begin, seg] : sim.memory().by_address()) {
      Segment g;
      g.begin = seg.begin;
      g.end = seg.end;
      if (seg.free()) {
        g.acceptable = true;
        scan_.push_back(g);
        continue;
      }
      if (!IterationSim::is_buffer(seg.owner)) {
        scan_.push_back(g);  // reserved for the task being prepared
        continue;
      }
      const BufferState& bs = sim.buffer_state(seg.owner);
      const int32_t inst = bs.instance;
      if (inst < 0) {
        scan_.push_back(g);  // a workspace in use
        continue;
      }
      const InstanceState& s = sim.state(inst);
      // Criterion (a) (not needed up to the horizon, nor by the running task) and (b).
      const int64_t next = sim.next_use(inst);
      if (sim.locked(inst) || !s.created || !s.used_since_arrival || next <= request.horizon) {
        scan_.push_back(g);
        continue;
      }
      g.acceptable = true;
      g.victim = inst;
      g.next_use = next;
      g.users_end_ms = -std::numeric_limits<double>::infinity();
      for (int32_t u : bs.users)
        if (u >= 0) g.users_end_ms = std::max(g.users_end_ms, timeline.step(u).end_ms);
      const bool soon = next != IterationSim::kNever && next - here <= costs_.lookahead_tasks;
      const int64_t bytes = sim.instance_bytes(inst);
      const double refetch_ms = costs_.refetch_cost && soon ? sim.cost().host_to_device_ms(bytes) : 0.0;
      g.refetch_ms = refetch_ms;
      if (s.host_valid) {
        g.future_ms = refetch_ms;
      } else {
        g.needs_copy = true;
        g.writer_end_ms = bs.last_writer >= 0 ? timeline.step(bs.last_writer).end_ms : 0.0;
        g.copy_ms = sim.cost().device_to_host_ms(bytes);
        g.future_ms = refetch_ms;
        // A droppable block leaves the cheaper way: dropped (its recomputation
        // later) or offloaded (its copy now and, if needed soon, back).
        if (costs_.drop_droppable && sim.droppable(inst)) {
          const double recompute_ms = sim.recompute_ms(inst);
          if (recompute_ms <= g.copy_ms + refetch_ms) {
            g.drop = true;
            g.recompute_ms = recompute_ms;
            for (TaskId w : sim.tdfg().blocks[sim.block_of(inst)].writers)
              g.drop_if_copy_stalls = g.drop_if_copy_stalls || sim.tdfg().tasks[w].has_algorithms;
          }
        }
      }
      scan_.push_back(g);
    }
    scan_generation_ = sim.generation();
    scan_steps_ = timeline.steps().size();
    scan_horizon_ = request.horizon;
    scan_pos_ = here;
  }
  // Fig. 3: offloads queue on the d2h stream; the writer waits for them and
  // for the last users of the freed blocks.
  OffloadScheme best;
  size_t best_i = 0, best_j = 0;
  auto key = [](const OffloadScheme& a) {
    return std::make_tuple(a.delay_ms + a.future_ms, a.transfer_ms, -a.soonest_next_use, a.begin);
  };
  const size_t n = scan_.size();
  drop_.assign(n, false);
  std::vector<bool> best_drop;
  size_t j = 0;  // the window [i, j): first segment past it
  for (size_t i = 0; i < n; ++i) {
    if (!scan_[i].acceptable) continue;
    const int64_t begin = scan_[i].begin;
    j = std::max(j, i);
    while (j < n && scan_[j].acceptable && scan_[j].begin - begin < need) ++j;
    const int64_t span_end = j == i ? begin : scan_[j - 1].end;
    if (span_end - begin < need) {
      if (j == n) break;
      i = j;  // blocked: no window can cross j
      continue;
    }
    OffloadScheme c;
    c.found = true;
    c.begin = begin;
    c.soonest_next_use = IterationSim::kNever;
    double copy_free_ms = d2h_free_ms;
    double ready_ms = writer_ready_ms;
    for (size_t k = i; k < j; ++k) {
      const Segment& g = scan_[k];
      if (g.victim < 0) continue;
      c.soonest_next_use = std::min(c.soonest_next_use, g.next_use);
      ready_ms = std::max(ready_ms, g.users_end_ms);
      if (g.drop && g.drop_if_copy_stalls) {
        // A convolution's recomputation costs as much compute as its first
        // run: worth it only where its offload would hold the writer up by
        // more (a copy hidden behind the compute stream costs nothing now).
        const double copy_end = std::max(copy_free_ms, g.writer_end_ms) + g.copy_ms;
        drop_[k] = g.recompute_ms <= std::max(0.0, copy_end - ready_ms) + g.refetch_ms;
      } else {
        drop_[k] = g.drop;
      }
      if (drop_[k]) {
        c.future_ms += g.recompute_ms;
        continue;
      }
      c.future_ms += g.future_ms;
      c.refetch_ms += g.refetch_ms;
      if (g.needs_copy) {
        const double start = std::max(copy_free_ms, g.writer_end_ms);
        copy_free_ms = start + g.copy_ms;
        c.transfer_ms += g.copy_ms;
        ready_ms = std::max(ready_ms, copy_free_ms);
      }
    }
    c.delay_ms = ready_ms - writer_ready_ms;
    if (!best.found || key(c) < key(best)) {
      best = c;
      best_i = i;
      best_j = j;
      best_drop.assign(drop_.begin() + static_cast<std::ptrdiff_t>(i), drop_.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  for (size_t k = best_i; best.found && k < best_j; ++k) {
    if (scan_[k].victim < 0) continue;
    best.victims.push_back(scan_[k].victim);
    best.drop.push_back(best_drop[k - best_i]);
  }
  return best;
}

int64_t OffloadSchemeFinder::apply(IterationSim& sim, const OffloadScheme& scheme) {
  for (size_t v = 0; v < scheme.victims.size(); ++v) {
    if (scheme.drop[v]) sim.drop(scheme.victims[v]);
    else sim.evict(scheme.victims[v]);
  }
  return scheme.begin;
}

}  // namespace mplan
