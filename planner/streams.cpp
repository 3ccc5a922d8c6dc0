#include "planner/streams.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "profiler/cost_model.h"

namespace mplan {

SlotSteps merge_slot_steps(const SlotSteps& a, const SlotSteps& b) {
  SlotSteps out;
  for (int i = 0; i < kSlotCount; ++i) out[i] = std::max(a[i], b[i]);
  return out;
}

StreamTimeline::StreamTimeline(int copy_engines, double duplex_slowdown)
    : copy_engines_(copy_engines), duplex_slowdown_(duplex_slowdown) {
  MPLAN_CHECK(copy_engines == 1 || copy_engines == 2, "copy_engines must be 1 or 2");
  MPLAN_CHECK(duplex_slowdown >= 1.0 && duplex_slowdown <= kMaxDuplexSlowdown,
              fmt::format("duplex_slowdown must be in 1..{}, not {}", kMaxDuplexSlowdown, duplex_slowdown));
}

// Walks the other direction's copies from start_ms: alone the copy advances
// at its own rate, beside one of them at 1/duplex_slowdown of it. The other
// direction's last copy, if no step has been ordered after it yet (no event,
// nothing queued behind it), is slowed as well (both share the link until the
// first ends); a copy that something already follows keeps its end.
double StreamTimeline::copy_end_ms(int other_slot, double start_ms, double alone_ms) {
  const std::vector<int32_t>& copies = copy_steps_[other_slot];
  auto it = std::lower_bound(copies.begin(), copies.end(), start_ms,
                             [this](int32_t copy, double t) { return steps_[copy].end_ms <= t; });
  const double f = duplex_slowdown_;
  double t = start_ms, left_ms = alone_ms;
  for (; it != copies.end() && left_ms > 0; ++it) {
    Step& other = steps_[*it];
    if (other.start_ms > t) {
      const double alone = std::min(left_ms, other.start_ms - t);
      t += alone;
      left_ms -= alone;
      if (left_ms <= 0) break;
    }
    const bool unobserved = *it == last_on_slot_[other_slot] && other.records == kNoEvent;
    if (unobserved) {
      // From t both run at 1/f; the other had other.end_ms - t of work left
      // alone (no copy of this direction overlapped it after t: this slot is FIFO).
      const double other_left = other.end_ms - t;
      const double shared = f * std::min(left_ms, other_left);
      other.end_ms = t + shared + std::max(0.0, other_left - left_ms);
      free_at_ms_[other_slot] = other.end_ms;
      t += shared;
      left_ms -= shared / f;
      break;  // nothing follows the last copy
    }
    const double shared = std::min(left_ms * f, other.end_ms - t);
    t += shared;
    left_ms -= shared / f;
  }
  return t + std::max(0.0, left_ms);
}

int32_t StreamTimeline::issue(Step step, int slot, double duration_ms, const SlotSteps& after) {
  auto index = static_cast<int32_t>(steps_.size());
  SlotSteps clock = last_on_slot_[slot] >= 0 ? clock_[last_on_slot_[slot]] : kNoSlotSteps;
  double ready_ms = free_at_ms_[slot];
  double waited_ms = 0;
  // The latest step per slot is enough: a stream is FIFO, so it implies the earlier ones.
  SlotSteps latest = kNoSlotSteps;
  for (int32_t a : after) {
    if (a < 0) continue;
    MPLAN_CHECK(a < index, "a step can only follow an issued step");
    int s = slot_of_[a];
    MPLAN_CHECK(s >= 0, "a device step cannot wait for a host step");
    latest[s] = std::max(latest[s], a);
  }
  for (int s = 0; s < kSlotCount; ++s) {
    int32_t a = latest[s];
    if (a < 0 || clock[s] >= a) continue;  // already ordered after it
    if (steps_[a].records == kNoEvent) steps_[a].records = event_count_++;
    step.waits.push_back(steps_[a].records);
    clock = merge_slot_steps(clock, clock_[a]);
    waited_ms = std::max(waited_ms, steps_[a].end_ms);
  }
  std::sort(step.waits.begin(), step.waits.end());
  clock[slot] = index;
  double start_ms = std::max(ready_ms, waited_ms);
  if (slot == kComputeSlot) stall_ms_ += start_ms - ready_ms;
  step.index = index;
  step.start_ms = start_ms;
  step.end_ms = start_ms + duration_ms;
  if (slot != kComputeSlot && copy_engines_ == 2 && duration_ms > 0) {
    const int other = slot == kH2dSlot ? kD2hSlot : kH2dSlot;
    if (duplex_slowdown_ > 1.0) step.end_ms = copy_end_ms(other, start_ms, duration_ms);
    copy_steps_[slot].push_back(index);
  }
  switch (slot) {
    case kComputeSlot: step.stream = StreamKind::compute; break;
    case kH2dSlot: step.stream = copy_engines_ == 2 ? StreamKind::h2d : StreamKind::copy; break;
    default: step.stream = StreamKind::d2h; break;
  }
  free_at_ms_[slot] = step.end_ms;
  last_on_slot_[slot] = index;
  steps_.push_back(std::move(step));
  slot_of_.push_back(slot);
  clock_.push_back(clock);
  return index;
}

int32_t StreamTimeline::issue_host(Step step) {
  auto index = static_cast<int32_t>(steps_.size());
  step.index = index;
  step.stream = StreamKind::host;
  step.start_ms = step.end_ms = free_at_ms_[kComputeSlot];
  steps_.push_back(std::move(step));
  slot_of_.push_back(-1);
  clock_.push_back(kNoSlotSteps);
  return index;
}

}  // namespace mplan
