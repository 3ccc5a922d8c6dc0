#include "planner/prefetch_pruning.h"

#include <algorithm>
#include <array>
#include <set>

namespace mplan {
namespace {

// Per buffer: its one prefetch, if nothing else but its alloc and free uses it.
std::vector<int32_t> unread_prefetch_of_buffer(const Plan& plan) {
  const size_t n = plan.buffers.size();
  std::vector<int32_t> prefetch(n, -1);
  std::vector<int32_t> prefetches(n, 0);
  std::vector<bool> used(n, false);
  for (const Step& s : plan.steps) {
    switch (s.kind) {
      case StepKind::prefetch:
        if (s.buffer >= 0) {
          prefetch[static_cast<size_t>(s.buffer)] = s.index;
          prefetches[static_cast<size_t>(s.buffer)] += 1;
        }
        break;
      case StepKind::offload:
        if (s.buffer >= 0) used[static_cast<size_t>(s.buffer)] = true;
        break;
      case StepKind::compute:
      case StepKind::move:
        for (const std::vector<BufferId>* list : {&s.reads, &s.writes})
          for (BufferId b : *list)
            if (b >= 0) used[static_cast<size_t>(b)] = true;
        if (s.workspace >= 0) used[static_cast<size_t>(s.workspace)] = true;
        break;
      case StepKind::alloc:
      case StepKind::free: break;
    }
  }
  for (size_t b = 0; b < n; ++b)
    if (used[b] || prefetches[b] != 1 || plan.buffers[b].resident) prefetch[b] = -1;
  return prefetch;
}

// The summary's copy counts and arena figures, from the steps.
void recount_summary(Plan& plan, const Tdfg& tdfg) {
  PlanSummary& s = plan.summary;
  s.prefetch_count = 0;
  s.input_load_count = 0;
  s.bytes_to_device = 0;
  s.input_bytes = 0;
  std::set<std::pair<BlockId, int32_t>> loaded_inputs;
  int64_t live = 0, peak_live = 0, peak_end = 0;
  for (const Step& step : plan.steps) {
    if (step.buffer < 0) continue;
    const Buffer& b = plan.buffers[static_cast<size_t>(step.buffer)];
    if (step.kind == StepKind::prefetch) {
      const bool input = b.block == tdfg.input_block || b.block == tdfg.labels_block;
      // The first load of a round's input data is an input load; every other load a prefetch.
      if (input && loaded_inputs.insert({b.block, b.round}).second) {
        s.input_load_count += 1;
        s.input_bytes += b.bytes;
      } else {
        s.prefetch_count += 1;
        s.bytes_to_device += b.bytes;
      }
    }
    if (b.resident || (step.kind != StepKind::alloc && step.kind != StepKind::free)) continue;
    const int64_t length = align_up(std::max<int64_t>(1, b.bytes));
    if (step.kind == StepKind::alloc) {
      live += length;
      peak_live = std::max(peak_live, live);
      peak_end = std::max(peak_end, b.offset + length);
    } else {
      live -= length;
    }
  }
  s.simulated_ms = 0;
  for (const Step& step : plan.steps) s.simulated_ms = std::max(s.simulated_ms, step.end_ms);
  s.peak_arena_bytes = peak_end;
  s.peak_live_bytes = peak_live;
  s.fragmentation = peak_live > 0 ? static_cast<double>(peak_end) / static_cast<double>(peak_live) - 1 : 0.0;
}

}  // namespace

// Removing a step must keep every other happens-before of the plan. The
// steps after the removed prefetch R on its stream were ordered, through R,
// after what R waited for: the next step on the stream takes R's waits. A
// step that waited for R's event relied on R's stream up to R and on R's
// waits: the event is recorded instead by the step before R on its stream
// (or that step's own event stands for it), and the waiter takes R's waits too.
PrunedPrefetches remove_unread_prefetches(Plan& plan, const Tdfg& tdfg) {
  PrunedPrefetches out;
  out.new_step_index.resize(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) out.new_step_index[i] = static_cast<int32_t>(i);
  const std::vector<int32_t> prefetch = unread_prefetch_of_buffer(plan);
  std::vector<bool> dropped_buffer(plan.buffers.size(), false);
  for (size_t b = 0; b < prefetch.size(); ++b)
    if (prefetch[b] >= 0) {
      dropped_buffer[b] = true;
      out.removed += 1;
    }
  if (out.removed == 0) return out;

  std::vector<BufferId> new_buffer(plan.buffers.size(), kNoBuffer);
  std::vector<Buffer> buffers;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    if (dropped_buffer[b]) continue;
    new_buffer[b] = static_cast<BufferId>(buffers.size());
    buffers.push_back(plan.buffers[b]);
    buffers.back().id = new_buffer[b];
  }
  auto buffer = [&](BufferId b) { return b >= 0 ? new_buffer[static_cast<size_t>(b)] : b; };

  // Per event: the event that now stands for it (-1: none) and the waits it carries.
  const size_t events = static_cast<size_t>(std::max(plan.event_count, 0));
  std::vector<EventId> event_as(events);
  for (size_t e = 0; e < events; ++e) event_as[e] = static_cast<EventId>(e);
  std::vector<std::vector<EventId>> event_carries(events);
  auto resolve = [&](const std::vector<EventId>& waits) {
    std::vector<EventId> out_waits;
    for (EventId e : waits) {
      if (e < 0 || static_cast<size_t>(e) >= events) continue;
      if (event_as[static_cast<size_t>(e)] >= 0) out_waits.push_back(event_as[static_cast<size_t>(e)]);
      const std::vector<EventId>& carried = event_carries[static_cast<size_t>(e)];
      out_waits.insert(out_waits.end(), carried.begin(), carried.end());
    }
    std::sort(out_waits.begin(), out_waits.end());
    out_waits.erase(std::unique(out_waits.begin(), out_waits.end()), out_waits.end());
    return out_waits;
  };
  constexpr int kStreams = 4;  // compute, h2d, d2h, copy (host steps wait for nothing)
  std::array<int32_t, kStreams> last_kept;
  last_kept.fill(-1);
  std::array<std::vector<EventId>, kStreams> carried_to_next;
  std::vector<Step> steps;
  for (Step& s : plan.steps) {
    const int32_t old_index = s.index;
    const int stream = s.stream == StreamKind::host ? -1 : static_cast<int>(s.stream);
    std::vector<EventId> waits = resolve(s.waits);
    if (s.kind != StepKind::compute && s.buffer >= 0 && dropped_buffer[static_cast<size_t>(s.buffer)]) {
      out.new_step_index[static_cast<size_t>(old_index)] = -1;
      if (stream < 0) continue;
      std::vector<EventId>& next = carried_to_next[static_cast<size_t>(stream)];
      next.insert(next.end(), waits.begin(), waits.end());
      if (s.records >= 0 && static_cast<size_t>(s.records) < events) {
        const size_t e = static_cast<size_t>(s.records);
        const int32_t before = last_kept[static_cast<size_t>(stream)];
        event_carries[e] = waits;
        if (before < 0) {
          event_as[e] = -1;
        } else if (steps[static_cast<size_t>(before)].records < 0) {
          steps[static_cast<size_t>(before)].records = s.records;
        } else {
          event_as[e] = steps[static_cast<size_t>(before)].records;
        }
      }
      continue;
    }
    if (stream >= 0) {
      std::vector<EventId>& carried = carried_to_next[static_cast<size_t>(stream)];
      waits.insert(waits.end(), carried.begin(), carried.end());
      carried.clear();
      std::sort(waits.begin(), waits.end());
      waits.erase(std::unique(waits.begin(), waits.end()), waits.end());
      last_kept[static_cast<size_t>(stream)] = static_cast<int32_t>(steps.size());
    }
    s.waits = std::move(waits);
    s.index = static_cast<int32_t>(steps.size());
    out.new_step_index[static_cast<size_t>(old_index)] = s.index;
    s.buffer = buffer(s.buffer);
    s.workspace = buffer(s.workspace);
    for (BufferId& b : s.reads) b = buffer(b);
    for (BufferId& b : s.writes) b = buffer(b);
    steps.push_back(std::move(s));
  }
  // Events still recorded, renumbered in order.
  std::vector<EventId> new_event(events, -1);
  std::vector<bool> recorded(events, false);
  for (const Step& s : steps)
    if (s.records >= 0) recorded[static_cast<size_t>(s.records)] = true;
  EventId count = 0;
  for (size_t e = 0; e < events; ++e)
    if (recorded[e]) new_event[e] = count++;
  for (Step& s : steps) {
    if (s.records >= 0) s.records = new_event[static_cast<size_t>(s.records)];
    for (EventId& e : s.waits) e = new_event[static_cast<size_t>(e)];
  }
  for (TaskChoice& c : plan.choices) c.workspace = buffer(c.workspace);
  plan.steps = std::move(steps);
  plan.buffers = std::move(buffers);
  plan.event_count = count;
  recount_summary(plan, tdfg);
  return out;
}

}  // namespace mplan
