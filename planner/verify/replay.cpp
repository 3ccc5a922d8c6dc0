// The verifier replays a plan in issue order (plan.h). Happens-before comes
// from the plan's own streams and events only: each device step carries a
// vector clock, "the latest step of each device stream known to have ended
// before this step starts", built from its stream's previous step and the
// clocks of the events it waits for. Step x (on stream k) happens before step
// s iff x <= clock(s)[k], because a stream ends its steps in issue order.
// Four integers per clock keep the replay linear in the number of steps.
//
// Memory reuse (plan.h): a buffer's first writer must be ordered after every
// user of the freed buffers whose bytes it takes. A "painter" map keeps, for
// every arena byte, the last buffer allocated there; a new buffer's first
// writer must follow the last users (per stream) of the freed buffers it
// covers. A buffer inherits those constraints into its own last users, so a
// buffer freed without ever being used still passes them on.

#include "planner/verify/verifier.h"

namespace mplan::verifier {

void Verifier::init_instances() {
  // Host-sourced blocks exist on the host before their round; resident ones on the device.
  for (const Buffer& b : plan_.buffers) {
    if (b.block == kNoBlock || !valid_block(b.block)) continue;
    if (host_sourced(b.block) || b.resident) instance(b).version = std::max(instance(b).version, 1);
  }
}

void Verifier::replay() {
  init_instances();
  std::array<Clock, kDeviceStreams> stream_clock;
  stream_clock.fill(kNoClock);
  std::array<double, kDeviceStreams> stream_end_ms;
  stream_end_ms.fill(-INFINITY);
  std::array<int32_t, kDeviceStreams> stream_last;
  stream_last.fill(-1);

  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& step = plan_.steps[i];
    const int32_t s = static_cast<int32_t>(i);
    const int32_t k = step_slot_[i];
    check_step_times(s, step);
    if (k < 0) {
      if (step.kind == StepKind::alloc) do_alloc(s, step);
      if (step.kind == StepKind::free) do_free(s, step);
      continue;
    }
    // The step's start clock: its stream's previous step, then every event it waits for.
    Clock clock = stream_clock[k];
    if (k == 0) {  // the compute stream's wait for copies (summary.stall_ms)
      figures_.stall_ms += std::max(0.0, step.start_ms - compute_end_ms_);
      compute_end_ms_ = std::max(compute_end_ms_, step.end_ms);
    }
    if (step.end_ms + time_tolerance(step.end_ms) < step.start_ms)
      add(s, ViolationKind::timing, fmt::format("ends at {} ms before it starts at {} ms", step.end_ms, step.start_ms));
    if (stream_last[k] >= 0 && step.start_ms + time_tolerance(step.start_ms) < stream_end_ms[k])
      add(s, ViolationKind::timing,
          fmt::format("starts at {} ms, before the previous step on {} ({}) ends at {} ms", step.start_ms,
                      kSlotNames[k], stream_last[k], stream_end_ms[k]));
    for (EventId e : step.waits) {
      if (e < 0 || e >= static_cast<EventId>(events_.size())) {
        add(s, ViolationKind::event, fmt::format("waits for event {}, outside 0..{}", e, plan_.event_count - 1));
        continue;
      }
      const EventState& ev = events_[e];
      if (ev.recorder < 0) {
        add(s, ViolationKind::event, fmt::format("waits for event {}, which no step records", e));
        continue;
      }
      if (ev.recorder >= s) {
        add(s, ViolationKind::event,
            fmt::format("waits for event {}, which is recorded later, by {}", e, step_name(ev.recorder)));
        continue;
      }
      for (int j = 0; j < kDeviceStreams; ++j) clock[j] = std::max(clock[j], ev.end_clock[j]);
      if (step.start_ms + time_tolerance(step.start_ms) < ev.end_ms)
        add(s, ViolationKind::timing,
            fmt::format("starts at {} ms, before event {} (recorded by step {}) at {} ms", step.start_ms, e,
                        ev.recorder, ev.end_ms));
    }
    switch (step.kind) {
      case StepKind::compute: do_compute(s, step, k, clock); break;
      case StepKind::offload: do_offload(s, step, k, clock); break;
      case StepKind::prefetch: do_prefetch(s, step, k, clock); break;
      case StepKind::move: do_move(s, step, k, clock); break;
      default: break;
    }
    Clock end_clock = clock;
    end_clock[k] = s;
    stream_clock[k] = end_clock;
    stream_end_ms[k] = step.end_ms;
    stream_last[k] = s;
    if (step.records >= 0 && step.records < static_cast<EventId>(events_.size()) &&
        events_[step.records].recorder == s) {
      events_[step.records].end_clock = end_clock;
      events_[step.records].end_ms = step.end_ms;
    }
  }
}

// ---- alloc / free --------------------------------------------------------
void Verifier::do_alloc(int32_t s, const Step& step) {
  if (!valid_buffer(step.buffer)) {
    add(s, ViolationKind::bad_step, fmt::format("alloc of buffer {}, out of range", step.buffer));
    return;
  }
  const Buffer& b = plan_.buffers[step.buffer];
  BufferState& st = buffers_[step.buffer];
  if (b.resident) {
    add(s, ViolationKind::bad_step, fmt::format("alloc of resident {}", buffer_name(step.buffer)));
    return;
  }
  if (st.life != Life::unallocated) {
    add(s, ViolationKind::bad_step,
        fmt::format("{} is allocated again (first at step {})", buffer_name(step.buffer), st.alloc_step));
    return;
  }
  st.life = Life::live;
  st.alloc_step = s;
  if (!range_ok_[step.buffer]) return;  // reported by check_buffers
  const int64_t begin = b.offset, end = *range_end(b.offset, b.bytes);
  note_arena_alloc(begin, end);
  if (end <= begin) return;  // empty buffers take no bytes
  // Live buffers sharing bytes with this one.
  auto it = live_.lower_bound({begin - max_live_length_ + 1, std::numeric_limits<BufferId>::min()});
  for (; it != live_.end() && it->first.first < end; ++it) {
    if (it->second > begin)
      add(s, ViolationKind::overlap,
          fmt::format("{} overlaps live {}", buffer_name(step.buffer), buffer_name(it->first.second)));
  }
  live_.emplace(std::make_pair(begin, step.buffer), end);
  max_live_length_ = std::max(max_live_length_, end - begin);
  // Freed buffers whose bytes it takes: its first writer must follow their users.
  for (BufferId old : paint(begin, end, step.buffer)) {
    const BufferState& o = buffers_[old];
    if (o.life != Life::freed) continue;
    for (int j = 0; j < kDeviceStreams; ++j) {
      if (o.last_use[j] > st.must_follow[j]) {
        st.must_follow[j] = o.last_use[j];
        st.must_follow_owner[j] = o.last_use_owner[j];
      }
    }
  }
  st.last_use = st.must_follow;
  st.last_use_owner = st.must_follow_owner;
}

// Marks [begin, end) as last taken by `buffer`; returns the buffers that last held parts of it.
std::vector<BufferId> Verifier::paint(int64_t begin, int64_t end, BufferId buffer) {
  std::vector<BufferId> covered;
  auto it = painted_.lower_bound(begin);
  if (it != painted_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > begin) it = before;
  }
  std::vector<std::pair<int64_t, Segment>> pieces;
  while (it != painted_.end() && it->first < end) {
    covered.push_back(it->second.buffer);
    if (it->first < begin) pieces.push_back({it->first, Segment{begin, it->second.buffer}});
    if (it->second.end > end) pieces.push_back({end, Segment{it->second.end, it->second.buffer}});
    it = painted_.erase(it);
  }
  for (const auto& [start, segment] : pieces) painted_.emplace(start, segment);
  painted_.emplace(begin, Segment{end, buffer});
  std::sort(covered.begin(), covered.end());
  covered.erase(std::unique(covered.begin(), covered.end()), covered.end());
  return covered;
}

void Verifier::do_free(int32_t s, const Step& step) {
  if (!valid_buffer(step.buffer)) {
    add(s, ViolationKind::bad_step, fmt::format("free of buffer {}, out of range", step.buffer));
    return;
  }
  const Buffer& b = plan_.buffers[step.buffer];
  BufferState& st = buffers_[step.buffer];
  if (b.resident) {
    add(s, ViolationKind::bad_step, fmt::format("free of resident {}", buffer_name(step.buffer)));
    return;
  }
  if (st.life == Life::unallocated) {
    add(s, ViolationKind::bad_step, fmt::format("free of {}, which is not allocated", buffer_name(step.buffer)));
    return;
  }
  if (st.life == Life::freed) {
    add(s, ViolationKind::bad_step,
        fmt::format("{} is freed again (first at step {})", buffer_name(step.buffer), st.free_step));
    return;
  }
  if (st.ready_by_prefetch && !st.read_since_ready) {
    figures_.prefetches_freed_unread += 1;
    figures_.bytes_prefetched_unread += b.bytes;
    figures_.warnings.push_back(fmt::format("step {}: {} is freed unread: its prefetch at step {} was for nothing",
                                            s, buffer_name(step.buffer), st.ready_step));
  }
  st.life = Life::freed;
  st.free_step = s;
  live_.erase({b.offset, step.buffer});
  if (range_ok_[step.buffer]) figures_.live_bytes -= *range_end(b.offset, b.bytes) - b.offset;
}

// ---- uses ----------------------------------------------------------------
// Common checks of a use of buffer `id` by step s: it exists, is live.
bool Verifier::usable(int32_t s, BufferId id, const char* verb) {
  if (!valid_buffer(id)) {
    add(s, ViolationKind::bad_step, fmt::format("{} buffer {}, out of range", verb, id));
    return false;
  }
  const BufferState& st = buffers_[id];
  if (st.life == Life::unallocated) {
    add(s, ViolationKind::absent, fmt::format("{} {}, which is not allocated", verb, buffer_name(id)));
    return false;
  }
  if (st.life == Life::freed) {
    add(s, ViolationKind::use_after_free,
        fmt::format("{} {}, freed at step {}", verb, buffer_name(id), st.free_step));
    return false;
  }
  return true;
}

void Verifier::note_use(BufferId id, int32_t s, int k) {
  BufferState& st = buffers_[id];
  st.last_use[k] = s;
  st.last_use_owner[k] = id;
}

// A read of buffer `id` by step s with start clock `clock`: the buffer holds
// the block instance's latest content, and the step that put it there
// happens-before s. `who` says who reads, for messages.
void Verifier::check_read(int32_t s, BufferId id, const Clock& clock, const std::string& who, bool is_copy) {
  const Buffer& b = plan_.buffers[id];
  BufferState& st = buffers_[id];
  const std::string what = buffer_name(id);
  const int32_t inst_version = b.block == kNoBlock ? st.version : instance(b).version;
  if (st.version < 0) {
    if (is_copy) {
      add(s, ViolationKind::copy_unready,
          fmt::format("{} copies {} before anything was written into it", who, what));
    } else if (inst_version <= 0) {
      add(s, ViolationKind::unproduced,
          fmt::format("{} reads {} before its producer{}", who, what, producer_text(b)));
    } else {
      add(s, ViolationKind::unprefetched,
          fmt::format("{} reads {}, which nothing has filled: the prefetch that brings it back is missing or "
                      "comes later",
                      who, what));
    }
    return;
  }
  if (st.version < inst_version) {
    add(s, ViolationKind::stale,
        fmt::format("{} reads {}, an older copy: the block was written again since, at step {}", who, what,
                    instance(b).last_write_step));
    return;
  }
  st.read_since_ready = true;
  if (st.ready_step >= 0 && !happens_before(st.ready_step, clock)) {
    ViolationKind kind = is_copy              ? ViolationKind::copy_unready
                         : st.ready_by_prefetch ? ViolationKind::unprefetched
                                                : ViolationKind::unproduced;
    add(s, kind,
        fmt::format("{} reads {}, but the {} {} that fills it is not ordered before it by stream order or events",
                    who, what, st.ready_by_prefetch ? "prefetch" : "producer", step_name(st.ready_step)));
  }
}

std::string Verifier::producer_text(const Buffer& b) const {
  if (!valid_block(b.block) || tdfg_.blocks[b.block].writers.empty()) return "";
  return " (" + task_name(tdfg_.blocks[b.block].writers.front()) + ") has run";
}

// Write hazards of step s (stream k) writing buffer `id`.
void Verifier::check_write(int32_t s, BufferId id, int k, const Clock& clock, const std::string& who) {
  BufferState& st = buffers_[id];
  if (!st.written) {
    st.written = true;
    for (int j = 0; j < kDeviceStreams; ++j) {
      if (st.must_follow[j] >= 0 && st.must_follow[j] > clock[j])
        add(s, ViolationKind::overwrite,
            fmt::format("{} is the first writer of {}, which reuses the memory of {}, but is not ordered after "
                        "its user {}",
                        who, buffer_name(id), buffer_name(st.must_follow_owner[j]), step_name(st.must_follow[j])));
    }
  }
  for (int j = 0; j < kDeviceStreams; ++j) {
    if (j == k || st.reads_since_write[j] < 0) continue;
    if (st.reads_since_write[j] > clock[j])
      add(s, ViolationKind::overwrite,
          fmt::format("{} writes {} while {} may still be reading it", who, buffer_name(id),
                      step_name(st.reads_since_write[j])));
  }
  if (st.ready_step >= 0 && st.last_write_slot != k && !happens_before(st.ready_step, clock))
    add(s, ViolationKind::overwrite,
        fmt::format("{} writes {} while the earlier write by {} may still run", who, buffer_name(id),
                    step_name(st.ready_step)));
}

void Verifier::after_write(int32_t s, BufferId id, int k, int32_t version, bool by_prefetch) {
  BufferState& st = buffers_[id];
  st.version = version;
  st.ready_step = s;
  st.ready_by_prefetch = by_prefetch;
  st.reads_since_write = kNoClock;
  st.last_write_slot = k;
  st.read_since_ready = false;
  note_use(id, s, k);
}

// Checks that compute buffer `id` holds block `block` for the step's round.
bool Verifier::matches_block(int32_t s, BufferId id, BlockId block, int32_t round, const std::string& who) {
  const Buffer& b = plan_.buffers[id];
  const bool resident = valid_block(block) && tdfg_.blocks[block].resident;
  const bool round_ok = b.round == round || b.round == kOnceRound || (resident && b.round == kOnceRound);
  if (b.block != block || !round_ok) {
    add(s, ViolationKind::bad_step,
        fmt::format("{} uses {} for {} {}", who, buffer_name(id), block_name(block), round_name(round)));
    return false;
  }
  return true;
}

// A block written by several tasks in turn (a chain of in-place tasks,
// gradients that accumulate) holds, for a task at a given place in the task
// order, the content of the last of its writers before that task. The
// content read must be that one: a recomputation that reruns only part of
// an in-place chain, or one of its later writers on its own output, leaves
// the block with another writer's content (docs/plan-format.md, "Recomputation").
void Verifier::check_writer_chain(int32_t s, BufferId id, TaskId reader, bool recompute, const std::string& who) {
  const Buffer& b = plan_.buffers[id];
  if (b.block == kNoBlock || b.resident || !valid_block(b.block)) return;
  const std::vector<TaskId>& writers = tdfg_.blocks[b.block].writers;
  const int32_t expected = static_cast<int32_t>(std::lower_bound(writers.begin(), writers.end(), reader) -
                                                writers.begin()) - 1;
  if (expected < 0) return;  // read before any writer: the block's first content comes from elsewhere
  const BufferState& st = buffers_[id];
  const InstanceState& inst = instance(b);
  if (st.version < 0 || static_cast<size_t>(st.version) >= inst.writer_of_version.size()) return;
  const int32_t actual = inst.writer_of_version[static_cast<size_t>(st.version)];
  if (actual == expected) return;
  add(s, ViolationKind::chain,
      fmt::format("{}{} reads {} as {} left it, but in the task order it reads what {} writes: {}", who,
                  recompute ? " (recomputed)" : "", buffer_name(id),
                  actual >= 0 ? task_name(writers[static_cast<size_t>(actual)]) : std::string("another step"),
                  task_name(writers[static_cast<size_t>(expected)]),
                  actual < expected ? "the chain of its writers was not rerun in full"
                                    : "a later writer ran on its own output without the chain's first writer"));
}

void Verifier::do_compute(int32_t s, const Step& step, int k, const Clock& clock) {
  if (!valid_task(step.task)) {
    add(s, ViolationKind::bad_step, fmt::format("compute step names task {}, out of range", step.task));
    return;
  }
  const Task& task = tdfg_.tasks[step.task];
  const bool update = step.task == tdfg_.update_task;
  if (update ? step.round != kOnceRound : !valid_round(step.round)) {
    add(s, ViolationKind::bad_step,
        fmt::format("{} runs in round {}, out of range (rounds 0..{}; the update runs once)", task.name,
                    step.round, rounds_ - 1));
    return;
  }
  const std::string who = task.name + " " + round_name(step.round);
  const size_t cell = task_round_index(step.task, step.round);
  if (step.recompute) {
    check_recompute_step(s, step, task, cell, who);
  } else if (++compute_count_[cell] == 1) {
    compute_step_of_[cell] = s;
  } else {
    add(s, ViolationKind::coverage,
        fmt::format("{} runs again (first at step {})", who, compute_step_of_[cell]));
  }
  // A recompute step lists the buffers of the task's recompute signature.
  const std::vector<BlockId>& task_reads = step.recompute ? task.recompute_reads : task.reads;
  const std::vector<BlockId>& task_writes = step.recompute ? task.recompute_writes : task.writes;
  if (step.reads.size() != task_reads.size() || step.writes.size() != task_writes.size())
    add(s, ViolationKind::bad_step,
        fmt::format("{} lists {} read and {} written buffers; the {} reads {} and writes {} blocks", who,
                    step.reads.size(), step.writes.size(), step.recompute ? "recomputation" : "task",
                    task_reads.size(), task_writes.size()));
  if (update) check_update(s, clock);
  if (task.kind == TaskKind::BP2 && update_step_ >= 0)
    add(s, ViolationKind::update_early,
        fmt::format("{} comes after the update ({})", who, step_name(update_step_)));

  // Reads first (an accumulating writer reads the block it writes).
  for (size_t i = 0; i < std::min(step.reads.size(), task_reads.size()); ++i) {
    const BufferId id = step.reads[i];
    if (!usable(s, id, (who + " reads").c_str())) continue;
    if (!matches_block(s, id, task_reads[i], step.round, who)) continue;
    check_read(s, id, clock, who, /*is_copy=*/false);
    check_writer_chain(s, id, step.task, step.recompute, who);
    BufferState& st = buffers_[id];
    note_use(id, s, k);
    st.reads_since_write[k] = s;
  }
  for (size_t i = 0; i < std::min(step.writes.size(), task_writes.size()); ++i) {
    const BufferId id = step.writes[i];
    if (!usable(s, id, (who + " writes").c_str())) continue;
    if (!matches_block(s, id, task_writes[i], step.round, who)) continue;
    check_write(s, id, k, clock, who);
    const Buffer& b = plan_.buffers[id];
    InstanceState& inst = instance(b);
    inst.version += 1;
    inst.last_write_step = s;
    const std::vector<TaskId>& writers = tdfg_.blocks[b.block].writers;
    const auto at = std::lower_bound(writers.begin(), writers.end(), step.task);
    if (inst.writer_of_version.size() <= static_cast<size_t>(inst.version))
      inst.writer_of_version.resize(static_cast<size_t>(inst.version) + 1, -1);
    inst.writer_of_version[static_cast<size_t>(inst.version)] =
        at != writers.end() && *at == step.task ? static_cast<int32_t>(at - writers.begin()) : -1;
    after_write(s, id, k, inst.version, /*by_prefetch=*/false);
  }
  // The workspace: the choice's buffer, written (first) by this step.
  const TaskChoice* choice = choice_of_[cell];
  // A recomputation reruns the choice's option with a workspace of its own,
  // at least as large as the choice's (none where the choice needs none).
  if (choice != nullptr && !step.recompute && step.workspace != choice->workspace)
    add(s, ViolationKind::bad_step,
        fmt::format("{} uses workspace buffer {}, but its choice names {}", who, step.workspace, choice->workspace));
  if (choice != nullptr && step.recompute) {
    const bool needs = choice->workspace_bytes > 0;
    const bool has = step.workspace != kNoBuffer && valid_buffer(step.workspace);
    if (needs != has || (has && plan_.buffers[step.workspace].bytes < choice->workspace_bytes))
      add(s, ViolationKind::bad_step,
          fmt::format("{} (recomputed) uses workspace buffer {}, but its choice's option needs {}", who,
                      step.workspace, format_bytes(choice->workspace_bytes)));
  }
  if (step.workspace != kNoBuffer && usable(s, step.workspace, (who + " uses workspace").c_str())) {
    const Buffer& w = plan_.buffers[step.workspace];
    if (w.workspace_of != step.task) {
      add(s, ViolationKind::bad_step,
          fmt::format("{} uses {} as its workspace", who, buffer_name(step.workspace)));
    } else {
      check_write(s, step.workspace, k, clock, who);
      after_write(s, step.workspace, k, buffers_[step.workspace].version + 1, false);
      buffers_[step.workspace].reads_since_write[k] = s;
    }
  }
}

// SuperNeurons §3.4 recomputation (plan.h Step::recompute): a second run of
// an FP task that has a recompute signature (Task::recompute_reads /
// recompute_writes: batchnorm from its saved statistics, dropout's mask
// again, a convolution with its first run's algorithm), after the task's own
// run in the round. What it reads must be current like any read; what it
// writes becomes the block's latest content. Its workspace is checked with
// the first run's choice (do_compute).
void Verifier::check_recompute_step(int32_t s, const Step& step, const Task& task, size_t cell, const std::string& who) {
  if (task.kind != TaskKind::FP || task.recompute_writes.empty())
    add(s, ViolationKind::coverage,
        fmt::format("{} is recomputed, but only FP tasks with a recompute signature (Task::recompute_writes) may be",
                    who));
  else if (compute_count_[cell] == 0)
    add(s, ViolationKind::coverage, fmt::format("{} is recomputed before its first run", who));
}

// moDNN: gradients accumulate over every round before the update (§IV-A).
void Verifier::check_update(int32_t s, const Clock& clock) {
  update_step_ = s;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    if (tdfg_.tasks[t].kind != TaskKind::BP2) continue;
    for (int32_t r = 0; r < rounds_; ++r) {
      const int32_t bp2 = compute_step_of_[task_round_index(t, r)];
      if (bp2 < 0) {
        add(s, ViolationKind::update_early,
            fmt::format("the update runs before {} {} (not issued yet)", task_name(t), round_name(r)));
      } else if (!happens_before(bp2, clock)) {
        add(s, ViolationKind::update_early,
            fmt::format("the update is not ordered after {}", step_name(bp2)));
      }
    }
  }
}

// The host slot of step s, checked against the device buffer.
bool Verifier::slot_matches(int32_t s, const Step& step) {
  if (step.host_slot < 0 || step.host_slot >= static_cast<HostSlotId>(plan_.host_slots.size())) {
    add(s, ViolationKind::bad_step, fmt::format("{} names host slot {}, out of range", step_kind_name(step.kind),
                                                step.host_slot));
    return false;
  }
  const HostSlot& h = plan_.host_slots[step.host_slot];
  const Buffer& b = plan_.buffers[step.buffer];
  if (h.block != b.block || h.round != b.round || h.bytes < b.bytes) {
    add(s, ViolationKind::bad_step,
        fmt::format("host slot {} ({} {}, {} bytes) does not fit {}", step.host_slot, block_name(h.block),
                    round_name(h.round), h.bytes, buffer_name(step.buffer)));
    return false;
  }
  return true;
}

void Verifier::do_offload(int32_t s, const Step& step, int k, const Clock& clock) {
  const std::string who = "the offload";
  count_copy(step);
  if (!usable(s, step.buffer, "offloads")) return;
  const Buffer& b = plan_.buffers[step.buffer];
  if (b.resident || b.block == kNoBlock) {
    add(s, ViolationKind::bad_step, fmt::format("offload of {}, which is never copied", buffer_name(step.buffer)));
    return;
  }
  check_read(s, step.buffer, clock, who, /*is_copy=*/true);
  BufferState& st = buffers_[step.buffer];
  note_use(step.buffer, s, k);
  st.reads_since_write[k] = s;
  if (!slot_matches(s, step)) return;
  HostSlotState& slot = slots_[step.host_slot];
  slot.version = st.version;
  slot.filled_step = s;
  slot.clobbered_by = -1;
  overwrite_overlapping_host_slots(s, step.host_slot, clock);
}

void Verifier::do_prefetch(int32_t s, const Step& step, int k, const Clock& clock) {
  const std::string who = "the prefetch";
  count_copy(step);
  if (!usable(s, step.buffer, "prefetches into")) return;
  const Buffer& b = plan_.buffers[step.buffer];
  if (b.resident || b.block == kNoBlock) {
    add(s, ViolationKind::bad_step, fmt::format("prefetch into {}, which is never copied", buffer_name(step.buffer)));
    return;
  }
  if (!slot_matches(s, step)) return;
  const HostSlotState& slot = slots_[step.host_slot];
  check_host_slot_intact(s, step);
  if (slot.version < 0) {
    add(s, ViolationKind::copy_unready,
        fmt::format("prefetch of {} from host slot {}, which no offload has filled", buffer_name(step.buffer),
                    step.host_slot));
  } else if (slot.filled_step >= 0 && !happens_before(slot.filled_step, clock)) {
    add(s, ViolationKind::copy_unready,
        fmt::format("prefetch of {} from host slot {} is not ordered after {} that fills it",
                    buffer_name(step.buffer), step.host_slot, step_name(slot.filled_step)));
  }
  check_write(s, step.buffer, k, clock, who);
  after_write(s, step.buffer, k, slot.version, /*by_prefetch=*/true);
}

// A move copies a block instance between two live device buffers of that
// instance: the source must hold its latest content, ordered before the move;
// the destination takes the content (and the source's version).
void Verifier::do_move(int32_t s, const Step& step, int k, const Clock& clock) {
  const std::string who = "the move";
  if (step.reads.size() != 1 || step.writes.size() != 1 || step.writes[0] != step.buffer) {
    add(s, ViolationKind::bad_step,
        fmt::format("a move reads one buffer and writes one, its `buffer`: it reads {} and writes {}",
                    step.reads.size(), step.writes.size()));
    return;
  }
  const BufferId from = step.reads[0], to = step.writes[0];
  if (!usable(s, from, "moves") || !usable(s, to, "moves into")) return;
  const Buffer& a = plan_.buffers[from];
  const Buffer& b = plan_.buffers[to];
  if (a.resident || b.resident || a.block == kNoBlock || a.block != b.block || a.round != b.round ||
      a.bytes != b.bytes) {
    add(s, ViolationKind::bad_step,
        fmt::format("a move copies one block instance between its own buffers, not {} into {}", buffer_name(from),
                    buffer_name(to)));
    return;
  }
  ++figures_.move_count;
  figures_.bytes_moved = checked_add(figures_.bytes_moved, std::max<int64_t>(a.bytes, 0)).value_or(INT64_MAX);
  check_read(s, from, clock, who, /*is_copy=*/true);
  BufferState& source = buffers_[from];
  note_use(from, s, k);
  source.reads_since_write[k] = s;
  check_write(s, to, k, clock, who);
  after_write(s, to, k, source.version, /*by_prefetch=*/false);
}

// Offload step s wrote host slot `filled`: the copies of slots sharing its
// bytes are gone, and no prefetch may still be reading them.
void Verifier::overwrite_overlapping_host_slots(int32_t s, HostSlotId filled, const Clock& clock) {
  for (HostSlotId other : host_overlaps_[filled]) {
    HostSlotState& o = slots_[other];
    if (o.last_reader >= 0 && !happens_before(o.last_reader, clock))
      add(s, ViolationKind::overwrite,
          fmt::format("the offload into host slot {} overwrites host bytes of slot {} while {} may still read them",
                      filled, other, step_name(o.last_reader)));
    if (o.version >= 0) {
      o.clobbered_by = s;
      o.clobbered_via = filled;
    }
  }
}

// A prefetch reads a host copy that an offload into a slot sharing its bytes overwrote.
void Verifier::check_host_slot_intact(int32_t s, const Step& step) {
  HostSlotState& slot = slots_[step.host_slot];
  slot.last_reader = s;
  if (slot.clobbered_by < 0) return;
  const HostSlot& h = plan_.host_slots[step.host_slot];
  add(s, ViolationKind::copy_unready,
      fmt::format("prefetch of {} from host slot {} ({} {}), whose bytes {} overwrote (host slot {} shares them): "
                  "the copy is gone",
                  buffer_name(step.buffer), step.host_slot, block_name(h.block), round_name(h.round),
                  step_name(slot.clobbered_by), slot.clobbered_via));
}

// Times must be finite: NaN compares false and would pass every timing check.
void Verifier::check_step_times(int32_t s, const Step& step) {
  if (!std::isfinite(step.start_ms) || !std::isfinite(step.end_ms) || step.start_ms < 0)
    add(s, ViolationKind::timing,
        fmt::format("start {} ms and end {} ms must be finite and not negative", step.start_ms, step.end_ms));
  else
    figures_.simulated_ms = std::max(figures_.simulated_ms, step.end_ms);
}

void Verifier::note_arena_alloc(int64_t begin, int64_t end) {
  figures_.live_bytes += end - begin;
  figures_.peak_live_bytes = std::max(figures_.peak_live_bytes, figures_.live_bytes);
  figures_.peak_arena_bytes = std::max(figures_.peak_arena_bytes, end);
}

void Verifier::count_copy(const Step& step) {
  const int64_t bytes = valid_buffer(step.buffer) ? std::max<int64_t>(plan_.buffers[step.buffer].bytes, 0) : 0;
  if (step.kind == StepKind::offload) {
    ++figures_.offload_count;
    figures_.bytes_to_host = checked_add(figures_.bytes_to_host, bytes).value_or(INT64_MAX);
    return;
  }
  ++figures_.load_count;
  figures_.bytes_loaded = checked_add(figures_.bytes_loaded, bytes).value_or(INT64_MAX);
  if (valid_buffer(step.buffer) && host_sourced(plan_.buffers[step.buffer].block)) {
    loaded_inputs_.insert(instance_key(plan_.buffers[step.buffer].block, plan_.buffers[step.buffer].round));
  } else {
    ++figures_.prefetch_count_at_least;
  }
}

}  // namespace mplan::verifier
