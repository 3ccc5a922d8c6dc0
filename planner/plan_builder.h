#pragma once
// Bookkeeping of the iteration simulator (planner/sim/iteration_sim.h):
// per-block use positions, the resident region, host slots, the reuse rule's
// freed ranges (plan.h), the ordering of a compute step after the steps on
// its buffers, the update step, and the finished Plan.

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "planner/memory_manager.h"
#include "planner/plan.h"
#include "planner/streams.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

// Per buffer: the steps a later step on it must be ordered after.
struct BufferDeps {
  SlotSteps users = kNoSlotSteps;        // last step per slot that read or wrote it
  int32_t last_writer = -1;
  // Users of earlier buffers in its range: its first writer must follow them.
  SlotSteps must_follow = kNoSlotSteps;
};

// Per block: the positions in `order` of the tasks that read or write it,
// ascending, each once.
std::vector<std::vector<int32_t>> block_uses(const Tdfg& tdfg, const std::vector<TaskId>& order);

// Gives every resident block a buffer at a fixed offset of the resident
// region, in block order (appended to `buffers`); fills `resident_buffer`
// (per block, kNoBuffer if not resident) and returns the region's bytes.
int64_t place_resident_blocks(const Tdfg& tdfg, std::vector<Buffer>& buffers,
                              std::vector<BufferId>& resident_buffer);

// Appends a host slot for `bytes` of `block` at the end of the host region
// (`host_bytes`, grown by the slot's aligned size); returns its id.
HostSlotId add_host_slot(std::vector<HostSlot>& host_slots, int64_t& host_bytes, BlockId block, int32_t round,
                         int64_t bytes);

// A step on one buffer: alloc, free, or an offload (device to host) or
// prefetch (host to device) to or from `host_slot`.
Step buffer_step(StepKind kind, BufferId buffer, int32_t round, HostSlotId host_slot = kNoHostSlot);
// An offload follows its buffer's last writer (it copies what was written).
SlotSteps offload_predecessors(const StreamTimeline& timeline, const BufferDeps& deps);
// A prefetch is its buffer's first writer: it follows the users of the range
// it reuses and the offload that filled the host copy (`host_writer`, -1: none).
SlotSteps prefetch_predecessors(const StreamTimeline& timeline, const BufferDeps& deps, int32_t host_writer);
// Records the offload `step` on `slot` as a user of its buffer (a later
// writer follows it) and counts its `bytes` in the summary.
void record_offload(BufferDeps& deps, int slot, int32_t step, int64_t bytes, PlanSummary& summary);
// Records the prefetch `step` on `slot` as its buffer's writer.
void record_prefetch(BufferDeps& deps, int slot, int32_t step);

// The reuse rule (plan.h): freed arena ranges and the last users of what was
// there; the first writer of a buffer placed over them follows those users.
class FreedRanges {
 public:
  // [begin, end) was freed after the steps `users`.
  void add(int64_t begin, int64_t end, const SlotSteps& users);
  // The users of every freed range [begin, end) overlaps; the overlapped
  // parts are forgotten (a later buffer there follows this one instead).
  SlotSteps take(int64_t begin, int64_t end);
  // The users take(begin, end) would return, forgetting nothing.
  SlotSteps users_in(int64_t begin, int64_t end) const;

 private:
  struct Range {
    int64_t end = 0;
    SlotSteps users = kNoSlotSteps;
  };
  std::map<int64_t, Range> by_begin_;
};

// The steps compute step `st` must follow, per slot, besides `after`: the
// last writers of what it reads, every earlier user of what it writes, and
// what its outputs and workspace must follow (read after write, write after
// read and write). `deps` is indexed by BufferId; its element type derives
// from BufferDeps.
template <class Deps>
SlotSteps compute_predecessors(const StreamTimeline& timeline, const Step& st, const std::vector<Deps>& deps,
                               SlotSteps after = kNoSlotSteps) {
  auto follow = [&](int32_t a) {
    if (a >= 0) after[timeline.slot_of(a)] = std::max(after[timeline.slot_of(a)], a);
  };
  for (BufferId buf : st.reads) follow(deps[buf].last_writer);
  for (BufferId buf : st.writes) {
    for (int32_t a : deps[buf].users) follow(a);
    for (int32_t a : deps[buf].must_follow) follow(a);
  }
  if (st.workspace != kNoBuffer) {
    for (int32_t a : deps[st.workspace].must_follow) follow(a);
  }
  return after;
}

// Records compute step `step` (issued from `st`) as the last compute user of
// its buffers and the last writer of what it writes.
template <class Deps>
void record_compute(const Step& st, int32_t step, std::vector<Deps>& deps) {
  for (BufferId buf : st.reads) deps[buf].users[kComputeSlot] = step;
  for (BufferId buf : st.writes) {
    BufferDeps& d = deps[buf];
    d.users[kComputeSlot] = step;
    d.last_writer = step;
    d.must_follow = kNoSlotSteps;
  }
  if (st.workspace != kNoBuffer) {
    deps[st.workspace].users[kComputeSlot] = step;
    deps[st.workspace].must_follow = kNoSlotSteps;
  }
}

// Issues the update task (once per iteration, on resident blocks only) with
// option `o` after the last writers of what it reads; returns its choice.
template <class Deps>
TaskChoice issue_update(const Tdfg& tdfg, const TaskOption& o, const std::vector<BufferId>& resident_buffer,
                        StreamTimeline& timeline, std::vector<Deps>& deps) {
  TaskId t = tdfg.update_task;
  const Task& task = tdfg.tasks[t];
  Step st;
  st.kind = StepKind::compute;
  st.task = t;
  st.round = kOnceRound;
  for (BlockId b : task.reads) {
    MPLAN_CHECK(tdfg.blocks[b].resident, "the update reads a non-resident block");
    st.reads.push_back(resident_buffer[b]);
  }
  for (BlockId b : task.writes) {
    MPLAN_CHECK(tdfg.blocks[b].resident, "the update writes a non-resident block");
    st.writes.push_back(resident_buffer[b]);
  }
  SlotSteps after = kNoSlotSteps;
  for (BufferId buf : st.reads) {
    int32_t w = deps[buf].last_writer;
    if (w >= 0) after[timeline.slot_of(w)] = std::max(after[timeline.slot_of(w)], w);
  }
  std::vector<BufferId> writes = st.writes;
  int32_t step = timeline.issue(std::move(st), kComputeSlot, o.time_ms, after);
  for (BufferId buf : writes) deps[buf].last_writer = step;
  TaskChoice c;
  c.task = t;
  c.round = kOnceRound;
  c.algorithm = o.algorithm;
  c.time_ms = o.time_ms;
  return c;
}

// What a simulation made, besides its steps and arena statistics.
struct SimulatedParts {
  int64_t arena_bytes = 0;
  int64_t resident_region_bytes = 0;
  int64_t host_bytes = 0;
  std::vector<int64_t> sub_batches;
  int copy_engines = 2;
  std::vector<TaskChoice> choices;
  std::vector<Buffer> buffers;
  std::vector<HostSlot> host_slots;
  PlanSummary summary;
};

// The finished Plan: the parts, the timeline's steps, events and stalls, the
// arena's peak and fragmentation, and the simulated time (the last step's end).
Plan finish_plan(SimulatedParts parts, StreamTimeline& timeline, const MemoryManager& mm);

}  // namespace mplan
