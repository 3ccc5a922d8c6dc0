#pragma once
// Simulated streams and events (moDNN §IV-B: StrmC for computations, StrmD
// for transfers; current GPUs have one copy engine per direction). Steps are
// issued in program order onto FIFO streams; a step that must follow a step
// of another stream waits for that step's event. Waits already implied by
// earlier waits are left out (each step carries a vector clock: the last step
// of every stream it is ordered after), so the plan has few events.

#include <array>
#include <cstdint>
#include <vector>

#include "planner/plan.h"

namespace mplan {

// Stream slots of the simulation: the compute stream and two copy
// directions; with one copy engine both directions share slot kH2dSlot.
inline constexpr int kComputeSlot = 0;
inline constexpr int kH2dSlot = 1;
inline constexpr int kD2hSlot = 2;
inline constexpr int kSlotCount = 3;
using SlotSteps = std::array<int32_t, kSlotCount>;  // a step index per slot, -1 for none
inline constexpr SlotSteps kNoSlotSteps = {-1, -1, -1};

class StreamTimeline {
 public:
  // duplex_slowdown (>= 1): how much slower a copy runs while the other
  // direction copies too (CostModel::duplex_slowdown); with two engines only.
  explicit StreamTimeline(int copy_engines, double duplex_slowdown = 1.0);

  // The slot a direction runs on (both copy directions share one slot when
  // there is one copy engine).
  int h2d_slot() const { return kH2dSlot; }
  int d2h_slot() const { return copy_engines_ == 2 ? kD2hSlot : kH2dSlot; }

  // Issues a device step (compute, offload or prefetch) of `duration_ms` onto
  // `slot`, after the steps in `after` (step indices; -1 ignored). Fills in
  // index, stream, waits, start and end; returns the index. A copy's
  // duration_ms is its time alone: where it overlaps copies of the other
  // direction issued before it, both run duplex_slowdown times slower while
  // they overlap, except that a copy another step already follows (it has an
  // event, or a step queued behind it) keeps its end: the copy issued later
  // then bears the whole slowdown of that overlap.
  int32_t issue(Step step, int slot, double duration_ms, const SlotSteps& after);
  // Issues an alloc or free at the current time (the compute stream's end).
  int32_t issue_host(Step step);

  double free_at_ms(int slot) const { return free_at_ms_[slot]; }
  const Step& step(int32_t index) const { return steps_[index]; }
  int slot_of(int32_t index) const { return slot_of_[index]; }
  const std::vector<Step>& steps() const { return steps_; }
  std::vector<Step> take_steps() { return std::move(steps_); }
  int32_t event_count() const { return event_count_; }
  // Compute-stream time spent waiting for other streams.
  double stall_ms() const { return stall_ms_; }

  double duplex_slowdown() const { return duplex_slowdown_; }

 private:
  // When a copy on this direction's slot that needs `alone_ms` alone, started
  // at start_ms, ends, walked beside the copies of the other direction's
  // `other_slot`; extends that slot's last copy where nothing follows it yet.
  double copy_end_ms(int other_slot, double start_ms, double alone_ms);

  int copy_engines_;
  double duplex_slowdown_;
  std::array<std::vector<int32_t>, kSlotCount> copy_steps_;  // per copy slot, in order (FIFO: ends ascend)
  std::vector<Step> steps_;
  std::vector<int> slot_of_;
  std::vector<SlotSteps> clock_;  // per step: last step of each slot ordered before or at it
  SlotSteps last_on_slot_ = kNoSlotSteps;
  std::array<double, kSlotCount> free_at_ms_ = {0, 0, 0};
  int32_t event_count_ = 0;
  double stall_ms_ = 0;
};

// Element-wise max of two SlotSteps (the later step of each slot).
SlotSteps merge_slot_steps(const SlotSteps& a, const SlotSteps& b);

}  // namespace mplan
