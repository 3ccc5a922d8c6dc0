#include "planner/plan_builder.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace mplan {

std::vector<std::vector<int32_t>> block_uses(const Tdfg& tdfg, const std::vector<TaskId>& order) {
  std::vector<std::vector<int32_t>> uses(tdfg.blocks.size());
  for (int32_t k = 0; k < static_cast<int32_t>(order.size()); ++k) {
    const Task& task = tdfg.tasks[order[k]];
    for (const std::vector<BlockId>* list : {&task.reads, &task.writes}) {
      for (BlockId b : *list) {
        if (uses[b].empty() || uses[b].back() != k) uses[b].push_back(k);
      }
    }
  }
  return uses;
}

int64_t place_resident_blocks(const Tdfg& tdfg, std::vector<Buffer>& buffers,
                              std::vector<BufferId>& resident_buffer) {
  auto nb = static_cast<int32_t>(tdfg.blocks.size());
  resident_buffer.assign(nb, kNoBuffer);
  int64_t offset = 0;
  for (BlockId b = 0; b < nb; ++b) {
    const Block& block = tdfg.blocks[b];
    if (!block.resident) continue;
    auto id = static_cast<BufferId>(buffers.size());
    buffers.push_back(Buffer{id, b, kNoTask, kOnceRound, block.bytes(1), offset, true});
    resident_buffer[b] = id;
    offset += align_up(std::max<int64_t>(1, block.bytes(1)));
  }
  return offset;
}

HostSlotId add_host_slot(std::vector<HostSlot>& host_slots, int64_t& host_bytes, BlockId block, int32_t round,
                         int64_t bytes) {
  auto id = static_cast<HostSlotId>(host_slots.size());
  host_slots.push_back(HostSlot{id, block, round, bytes, host_bytes});
  host_bytes += align_up(std::max<int64_t>(1, bytes));
  return id;
}

Step buffer_step(StepKind kind, BufferId buffer, int32_t round, HostSlotId host_slot) {
  Step st;
  st.kind = kind;
  st.buffer = buffer;
  st.host_slot = host_slot;
  st.round = round;
  return st;
}

SlotSteps offload_predecessors(const StreamTimeline& timeline, const BufferDeps& deps) {
  SlotSteps after = kNoSlotSteps;
  if (deps.last_writer >= 0) after[timeline.slot_of(deps.last_writer)] = deps.last_writer;
  return after;
}

SlotSteps prefetch_predecessors(const StreamTimeline& timeline, const BufferDeps& deps, int32_t host_writer) {
  SlotSteps after = deps.must_follow;
  if (host_writer >= 0) {
    int hs = timeline.slot_of(host_writer);
    after[hs] = std::max(after[hs], host_writer);
  }
  return after;
}

void record_offload(BufferDeps& deps, int slot, int32_t step, int64_t bytes, PlanSummary& summary) {
  deps.users[slot] = step;
  summary.offload_count++;
  summary.bytes_to_host += bytes;
}

void record_prefetch(BufferDeps& deps, int slot, int32_t step) {
  deps.must_follow = kNoSlotSteps;
  deps.last_writer = step;
  deps.users[slot] = step;
}

void FreedRanges::add(int64_t begin, int64_t end, const SlotSteps& users) { by_begin_[begin] = Range{end, users}; }

SlotSteps FreedRanges::take(int64_t begin, int64_t end) {
  SlotSteps users = kNoSlotSteps;
  auto it = by_begin_.upper_bound(begin);
  if (it != by_begin_.begin() && std::prev(it)->second.end > begin) --it;
  while (it != by_begin_.end() && it->first < end) {
    int64_t rb = it->first;
    Range d = it->second;
    it = by_begin_.erase(it);
    users = merge_slot_steps(users, d.users);
    // The parts outside [begin, end) stay freed.
    if (rb < begin) by_begin_[rb] = Range{begin, d.users};
    if (d.end > end) by_begin_[end] = Range{d.end, d.users};
  }
  return users;
}

SlotSteps FreedRanges::users_in(int64_t begin, int64_t end) const {
  SlotSteps users = kNoSlotSteps;
  auto it = by_begin_.upper_bound(begin);
  if (it != by_begin_.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != by_begin_.end() && it->first < end; ++it) users = merge_slot_steps(users, it->second.users);
  return users;
}

Plan finish_plan(SimulatedParts parts, StreamTimeline& timeline, const MemoryManager& mm) {
  Plan plan;
  plan.arena_bytes = parts.arena_bytes;
  plan.resident_region_bytes = parts.resident_region_bytes;
  plan.host_bytes = parts.host_bytes;
  plan.sub_batches = std::move(parts.sub_batches);
  plan.sub_batch = plan.sub_batches.front();
  plan.copy_engines = parts.copy_engines;
  plan.choices = std::move(parts.choices);
  plan.buffers = std::move(parts.buffers);
  plan.host_slots = std::move(parts.host_slots);
  plan.event_count = timeline.event_count();
  plan.summary = parts.summary;
  plan.summary.stall_ms = timeline.stall_ms();
  plan.summary.peak_arena_bytes = mm.peak_bytes();
  plan.summary.peak_live_bytes = mm.peak_live_bytes();
  plan.summary.fragmentation = mm.fragmentation();
  plan.steps = timeline.take_steps();
  for (const Step& s : plan.steps) plan.summary.simulated_ms = std::max(plan.summary.simulated_ms, s.end_ms);
  return plan;
}

}  // namespace mplan
