#include "planner/streams.h"

#include <algorithm>

#include "frontend/error.h"

namespace mplan {

SlotSteps merge_slot_steps(const SlotSteps& a, const SlotSteps& b) {
  SlotSteps out;
  for (int i = 0; i < kSlotCount; ++i) out[i] = std::max(a[i], b[i]);
  return out;
}

StreamTimeline::StreamTimeline(int copy_engines) : copy_engines_(copy_engines) {
  MPLAN_CHECK(copy_engines == 1 || copy_engines == 2, "copy_engines must be 1 or 2");
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
