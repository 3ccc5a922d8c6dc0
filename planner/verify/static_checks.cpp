// The verifier's checks of the plan as a whole (planner/verify.h): the
// header against the TDFG and its own formulas, the buffer and host-slot
// layouts, the choices, the events, the sizes, and the summary figures
// recomputed by the replay (planner/verify/replay.cpp).

#include "planner/verify/verifier.h"

namespace mplan::verifier {

// ---- plan-wide checks ----------------------------------------------------
void Verifier::check_header() {
  if (plan_.format_version != kPlanFormatVersion)
    add(-1, ViolationKind::header,
        fmt::format("format version {} is not {}", plan_.format_version, kPlanFormatVersion));
  if (plan_.copy_engines != 1 && plan_.copy_engines != 2)
    add(-1, ViolationKind::header, fmt::format("copy_engines is {}, not 1 or 2", plan_.copy_engines));
  if (plan_.event_count < 0)
    add(-1, ViolationKind::header, fmt::format("event_count is negative ({})", plan_.event_count));
  int64_t sum = 0, largest = 0;
  bool sum_overflows = false;
  for (size_t r = 0; r < plan_.sub_batches.size(); ++r) {
    int64_t b = plan_.sub_batches[r];
    if (b <= 0) add(-1, ViolationKind::header, fmt::format("sub-batch of round {} is {}, not positive", r, b));
    if (std::optional<int64_t> next = checked_add(sum, b)) sum = *next;
    else sum_overflows = true;
    largest = std::max(largest, b);
  }
  if (sum_overflows)
    add(-1, ViolationKind::header, "the sub-batches sum to more than an int64 holds");
  if (plan_.sub_batches.empty()) {
    add(-1, ViolationKind::header, "the plan has no rounds (sub_batches is empty)");
    plan_level_ok_ = false;
  }
  if (!sum_overflows && sum != plan_.batch)
    add(-1, ViolationKind::header,
        fmt::format("sub-batches {} sum to {}, not the batch {}", fmt::join(plan_.sub_batches, ", "), sum,
                    plan_.batch));
  if (!plan_.sub_batches.empty() && largest != plan_.sub_batch)
    add(-1, ViolationKind::header,
        fmt::format("sub_batch is {} but the largest round has {} samples", plan_.sub_batch, largest));
  rounds_ = static_cast<int32_t>(plan_.sub_batches.size());
  if (plan_.resident_region_bytes < 0 || plan_.arena_bytes < 0)
    add(-1, ViolationKind::budget,
        fmt::format("negative region size (resident {}, arena {})", plan_.resident_region_bytes,
                    plan_.arena_bytes));
  const std::optional<int64_t> regions = checked_add(plan_.resident_region_bytes, plan_.arena_bytes);
  if (!regions)
    add(-1, ViolationKind::budget,
        fmt::format("resident region {} + arena {} overflows int64, far beyond the budget of {} bytes ({})",
                    plan_.resident_region_bytes, plan_.arena_bytes, plan_.budget_bytes,
                    format_bytes(plan_.budget_bytes)));
  else if (*regions > plan_.budget_bytes)
    add(-1, ViolationKind::budget,
        fmt::format("resident region {} + arena {} = {} bytes exceeds the budget of {} bytes ({})",
                    plan_.resident_region_bytes, plan_.arena_bytes, *regions, plan_.budget_bytes,
                    format_bytes(plan_.budget_bytes)));
  check_header_against_tdfg();
  if (!plan_.task_names.empty() && plan_.task_names.size() != tdfg_.tasks.size())
    add(-1, ViolationKind::header,
        fmt::format("task_names has {} names but the TDFG has {} tasks", plan_.task_names.size(),
                    tdfg_.tasks.size()));
  if (!plan_.block_names.empty() && plan_.block_names.size() != tdfg_.blocks.size())
    add(-1, ViolationKind::header,
        fmt::format("block_names has {} names but the TDFG has {} blocks", plan_.block_names.size(),
                    tdfg_.blocks.size()));
}

void Verifier::check_buffers() {
  buffers_.assign(plan_.buffers.size(), BufferState{});
  range_ok_.assign(plan_.buffers.size(), true);
  std::vector<int32_t> resident_buffers_of(tdfg_.blocks.size(), 0);
  std::vector<BufferId> resident;
  for (size_t i = 0; i < plan_.buffers.size(); ++i) {
    const Buffer& b = plan_.buffers[i];
    const BufferId id = static_cast<BufferId>(i);
    if (b.id != id) add(-1, ViolationKind::bad_step, fmt::format("buffer at index {} has id {}", i, b.id));
    const bool is_block = b.block != kNoBlock;
    const bool is_workspace = b.workspace_of != kNoTask;
    if (is_block == is_workspace) {
      add(-1, ViolationKind::bad_step,
          fmt::format("buffer {} must have exactly one of a block ({}) and a workspace task ({})", id,
                      b.block, b.workspace_of));
    } else if (is_block && !valid_block(b.block)) {
      add(-1, ViolationKind::bad_step,
          fmt::format("buffer {}: block {} is out of range (the TDFG has {} blocks)", id, b.block,
                      tdfg_.blocks.size()));
    } else if (is_workspace && !valid_task(b.workspace_of)) {
      add(-1, ViolationKind::bad_step,
          fmt::format("buffer {}: workspace task {} is out of range (the TDFG has {} tasks)", id,
                      b.workspace_of, tdfg_.tasks.size()));
    }
    if (!(valid_round(b.round) || b.round == kOnceRound))
      add(-1, ViolationKind::bad_step, fmt::format("buffer {}: round {} is out of range", id, b.round));
    if (b.bytes < 0) add(-1, ViolationKind::bad_step, fmt::format("buffer {}: negative size {}", id, b.bytes));
    if (is_block && valid_block(b.block)) {
      const Block& block = tdfg_.blocks[b.block];
      if (block.resident != b.resident)
        add(-1, ViolationKind::bad_step,
            fmt::format("{}: the block is {}resident but the buffer is {}", buffer_name(id),
                        block.resident ? "" : "not ", b.resident ? "resident" : "in the arena"));
      std::optional<int64_t> per_samples = checked_mul(block.bytes_per_sample, sub_batch_of(b.round));
      std::optional<int64_t> need = per_samples ? checked_add(*per_samples, block.fixed_bytes) : std::nullopt;
      if (!need)
        add(-1, ViolationKind::bad_step,
            fmt::format("{}: {} at sub-batch {} would need more bytes than an int64 holds", buffer_name(id),
                        block.name, sub_batch_of(b.round)));
      else if (b.bytes < *need)
        add(-1, ViolationKind::bad_step,
            fmt::format("{} holds {} bytes but {} needs {} at sub-batch {}", buffer_name(id), b.bytes,
                        block.name, *need, sub_batch_of(b.round)));
      if (b.resident) {
        ++resident_buffers_of[b.block];
        if (b.round != kOnceRound)
          add(-1, ViolationKind::bad_step,
              fmt::format("resident {} has round {}, not once (-1)", buffer_name(id), b.round));
      }
    }
    if (b.offset < 0 || b.offset % kPlanAlignmentBytes != 0)
      add(-1, ViolationKind::budget,
          fmt::format("{}: offset {} is not a non-negative multiple of {}", buffer_name(id), b.offset,
                      kPlanAlignmentBytes));
    const int64_t region = b.resident ? plan_.resident_region_bytes : plan_.arena_bytes;
    const std::optional<int64_t> end = range_end(b.offset, b.bytes);
    if (!end) {
      if (b.offset >= 0 && b.bytes >= 0)
        add(-1, ViolationKind::budget,
            fmt::format("buffer {}: offset {} + {} bytes overflows int64, beyond its {} region of {} bytes", id,
                        b.offset, b.bytes, b.resident ? "resident" : "arena", region));
      range_ok_[i] = false;
    } else if (*end > region) {
      add(-1, ViolationKind::budget,
          fmt::format("{} ends at {}, beyond its {} region of {} bytes", buffer_name(id), *end,
                      b.resident ? "resident" : "arena", region));
    }
    if (b.resident) {
      if (range_ok_[i]) resident.push_back(id);
      buffers_[i].life = Life::live;
      buffers_[i].version = 1;  // weights and state are on the device before the iteration
    }
  }
  for (size_t blk = 0; blk < tdfg_.blocks.size(); ++blk) {
    if (tdfg_.blocks[blk].resident && resident_buffers_of[blk] != 1)
      add(-1, ViolationKind::coverage,
          fmt::format("resident block {} has {} resident buffers, not exactly one", tdfg_.blocks[blk].name,
                      resident_buffers_of[blk]));
  }
  // Resident buffers must not overlap: sweep by start, remembering the furthest end.
  std::sort(resident.begin(), resident.end(), [&](BufferId a, BufferId b) {
    return plan_.buffers[a].offset < plan_.buffers[b].offset;
  });
  BufferId furthest = kNoBuffer;
  int64_t furthest_end = 0;
  for (BufferId id : resident) {
    const Buffer& b = plan_.buffers[id];
    if (furthest != kNoBuffer && b.offset < furthest_end)
      add(-1, ViolationKind::overlap,
          fmt::format("{} overlaps {} in the resident region", buffer_name(id), buffer_name(furthest)));
    if (b.offset + align_up(b.bytes) > furthest_end) {
      furthest_end = b.offset + align_up(b.bytes);
      furthest = id;
    }
  }
}

void Verifier::check_host_slots() {
  slots_.assign(plan_.host_slots.size(), HostSlotState{});
  slot_range_ok_.assign(plan_.host_slots.size(), false);
  for (size_t i = 0; i < plan_.host_slots.size(); ++i) {
    const HostSlot& h = plan_.host_slots[i];
    if (h.id != static_cast<HostSlotId>(i))
      add(-1, ViolationKind::bad_step, fmt::format("host slot at index {} has id {}", i, h.id));
    if (!valid_block(h.block)) {
      add(-1, ViolationKind::bad_step, fmt::format("host slot {}: block {} is out of range", i, h.block));
      continue;
    }
    const std::optional<int64_t> end = h.bytes >= 0 ? checked_add(h.host_offset, h.bytes) : std::nullopt;
    if (h.host_offset < 0 || !end || *end > plan_.host_bytes)
      add(-1, ViolationKind::bad_step,
          fmt::format("host slot {} ({}) at {} of {} bytes is outside the host region of {} bytes", i,
                      block_name(h.block), h.host_offset, h.bytes, plan_.host_bytes));
    else
      slot_range_ok_[i] = true;
    // The program fills the slots of the input batch and labels with each round's data.
    if (host_sourced(h.block)) slots_[i].version = 1;
  }
}

void Verifier::check_choices() {
  if (!plan_level_ok_) return;
  const size_t cells = tdfg_.tasks.size() * static_cast<size_t>(rounds_ + 1);
  choice_count_.assign(cells, 0);
  choice_of_.assign(cells, nullptr);
  compute_count_.assign(cells, 0);
  compute_step_of_.assign(cells, -1);
  for (const TaskChoice& c : plan_.choices) {
    if (!valid_task(c.task)) {
      add(-1, ViolationKind::coverage, fmt::format("a choice names task {}, out of range", c.task));
      continue;
    }
    const bool update = c.task == tdfg_.update_task;
    if (update ? c.round != kOnceRound : !valid_round(c.round)) {
      add(-1, ViolationKind::coverage,
          fmt::format("the choice for {} has round {}, out of range", task_name(c.task), c.round));
      continue;
    }
    const size_t cell = task_round_index(c.task, c.round);
    if (++choice_count_[cell] == 2)
      add(-1, ViolationKind::coverage,
          fmt::format("{} {} has more than one choice", task_name(c.task), round_name(c.round)));
    choice_of_[cell] = &c;
    const std::string who = task_name(c.task) + " " + round_name(c.round);
    if (!update && c.sub_batch != plan_.sub_batches[c.round])
      add(-1, ViolationKind::coverage,
          fmt::format("the choice for {} is for sub-batch {}, but the round has {} samples", who, c.sub_batch,
                      plan_.sub_batches[c.round]));
    if (c.workspace_bytes > 0) {
      if (!valid_buffer(c.workspace)) {
        add(-1, ViolationKind::coverage,
            fmt::format("{} needs {} bytes of workspace but its choice names no valid buffer ({})", who,
                        c.workspace_bytes, c.workspace));
      } else {
        const Buffer& w = plan_.buffers[c.workspace];
        if (w.workspace_of != c.task || w.bytes < c.workspace_bytes)
          add(-1, ViolationKind::coverage,
              fmt::format("{} needs {} bytes of workspace but its {} is not such a workspace", who,
                          c.workspace_bytes, buffer_name(c.workspace)));
        if (w.offset != c.workspace_offset)
          add(-1, ViolationKind::coverage,
              fmt::format("{}: workspace_offset {} differs from its buffer's offset {}", who,
                          c.workspace_offset, w.offset));
      }
    }
    if (!c.micro_batches.empty()) {
      int64_t sum = 0;
      for (const MicroBatch& m : c.micro_batches) {
        sum = checked_add(sum, std::max<int64_t>(m.size, 0)).value_or(INT64_MAX);
        if (m.size <= 0 || m.workspace_bytes > c.workspace_bytes)
          add(-1, ViolationKind::coverage,
              fmt::format("{}: micro-batch of {} samples with {} bytes of workspace does not fit the "
                          "choice's {} bytes",
                          who, m.size, m.workspace_bytes, c.workspace_bytes));
      }
      if (sum != c.sub_batch)
        add(-1, ViolationKind::coverage,
            fmt::format("{}: micro-batches sum to {}, not the sub-batch {}", who, sum, c.sub_batch));
    }
  }
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    const bool update = t == tdfg_.update_task;
    for (int32_t r = update ? kOnceRound : 0; r < (update ? kOnceRound + 1 : rounds_); ++r) {
      if (choice_count_[task_round_index(t, r)] == 0)
        add(-1, ViolationKind::coverage, fmt::format("{} {} has no choice", task_name(t), round_name(r)));
    }
  }
}

// ---- events --------------------------------------------------------------
int32_t Verifier::expected_slot(StepKind kind) const {
  switch (kind) {
    case StepKind::compute:
    case StepKind::move: return 0;
    case StepKind::offload: return plan_.copy_engines == 1 ? 3 : 2;
    case StepKind::prefetch: return plan_.copy_engines == 1 ? 3 : 1;
    case StepKind::alloc:
    case StepKind::free: return -1;
  }
  return -1;
}

void Verifier::scan_events() {
  // Every event is recorded by one step: more events than steps cannot all be.
  if (static_cast<size_t>(std::max<int32_t>(plan_.event_count, 0)) > plan_.steps.size())
    add(-1, ViolationKind::event,
        fmt::format("event_count is {}, more than the {} steps that could record them", plan_.event_count,
                    plan_.steps.size()));
  events_.assign(std::min<size_t>(std::max<int32_t>(plan_.event_count, 0), plan_.steps.size()), EventState{});
  step_slot_.assign(plan_.steps.size(), -1);
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& step = plan_.steps[i];
    const int32_t s = static_cast<int32_t>(i);
    if (step.index != s) add(s, ViolationKind::bad_step, fmt::format("step at position {} has index {}", s, step.index));
    const int32_t expected = expected_slot(step.kind);
    const int32_t declared = device_slot(step.stream);
    if (declared != expected) {
      add(s, ViolationKind::bad_step,
          fmt::format("a {} step runs on stream {}, expected {} (copy_engines {})", step_kind_name(step.kind),
                      stream_kind_name(step.stream), expected < 0 ? "host" : kSlotNames[expected],
                      plan_.copy_engines));
    }
    // The stream the program will run it on; a device step put on "host" is treated as expected.
    step_slot_[i] = expected < 0 ? -1 : (declared >= 0 ? declared : expected);
    if (expected < 0 && (!step.waits.empty() || step.records != kNoEvent))
      add(s, ViolationKind::bad_step,
          fmt::format("{} step waits for or records events; alloc and free are host bookkeeping",
                      step_kind_name(step.kind)));
    if (step.records == kNoEvent) continue;
    if (step.records < 0 || step.records >= static_cast<EventId>(events_.size())) {
      add(s, ViolationKind::event,
          fmt::format("records event {}, outside 0..{}", step.records, plan_.event_count - 1));
      continue;
    }
    EventState& e = events_[step.records];
    if (++e.record_count == 1) {
      e.recorder = s;
    } else {
      add(s, ViolationKind::event,
          fmt::format("records event {} again (first recorded by step {})", step.records, e.recorder));
    }
  }
  for (size_t e = 0; e < events_.size(); ++e) {
    if (events_[e].record_count == 0)
      add(-1, ViolationKind::event, fmt::format("event {} is never recorded", e));
  }
}

// The plan's tables are allocated per (task, round): bounded first.
void Verifier::check_size_limits() {
  const int64_t rounds = static_cast<int64_t>(plan_.sub_batches.size());
  const int64_t tasks = std::max<int64_t>(1, static_cast<int64_t>(tdfg_.tasks.size()));
  if (rounds > kMaxRounds || rounds > kMaxTaskRounds / tasks) {
    add(-1, ViolationKind::header,
        fmt::format("{} rounds of {} tasks: more than a plan may have ({} rounds, {} task runs)", rounds, tasks,
                    kMaxRounds, kMaxTaskRounds));
    plan_level_ok_ = false;
  }
}

// Every header figure against what the TDFG and the plan's own layout imply.
void Verifier::check_header_against_tdfg() {
  if (!tdfg_.model_digest.empty()) {  // a TDFG built from a model (tests build some by hand)
    if (plan_.model_name != tdfg_.model_name)
      add(-1, ViolationKind::header,
          fmt::format("model_name is '{}', but the model is '{}'", plan_.model_name, tdfg_.model_name));
    if (plan_.model_digest != tdfg_.model_digest)
      add(-1, ViolationKind::header,
          fmt::format("model_digest is '{}', but the model's digest is '{}'", plan_.model_digest,
                      tdfg_.model_digest));
  }
  if (plan_.budget_bytes <= 0)
    add(-1, ViolationKind::header, fmt::format("budget_bytes is {}, not positive", plan_.budget_bytes));
  if (plan_.resident_bytes != tdfg_.resident_bytes())
    add(-1, ViolationKind::header,
        fmt::format("resident_bytes is {}, but the model's resident blocks (W, dW, optimizer state) take {}",
                    plan_.resident_bytes, tdfg_.resident_bytes()));
  // plan.h: arena_bytes = align_down(budget_bytes - resident_region_bytes, 256).
  if (std::optional<int64_t> left = checked_add(plan_.budget_bytes, -std::max<int64_t>(plan_.resident_region_bytes, 0));
      left && plan_.resident_region_bytes >= 0 && plan_.arena_bytes != align_down(*left))
    add(-1, ViolationKind::header,
        fmt::format("arena_bytes is {}, but budget {} - resident region {} aligned down to {} is {}", plan_.arena_bytes,
                    plan_.budget_bytes, plan_.resident_region_bytes, kPlanAlignmentBytes, align_down(*left)));
  for (size_t t = 0; t < plan_.task_names.size() && t < tdfg_.tasks.size(); ++t)
    if (plan_.task_names[t] != tdfg_.tasks[t].name) {
      add(-1, ViolationKind::header,
          fmt::format("task_names[{}] is '{}', but task {} is {}", t, plan_.task_names[t], t, tdfg_.tasks[t].name));
      break;
    }
  for (size_t b = 0; b < plan_.block_names.size() && b < tdfg_.blocks.size(); ++b)
    if (plan_.block_names[b] != tdfg_.blocks[b].name) {
      add(-1, ViolationKind::header,
          fmt::format("block_names[{}] is '{}', but block {} is {}", b, plan_.block_names[b], b,
                      tdfg_.blocks[b].name));
      break;
    }
  if (!plan_.block_types.empty() && plan_.block_types.size() != tdfg_.blocks.size())
    add(-1, ViolationKind::header,
        fmt::format("block_types has {} types but the TDFG has {} blocks", plan_.block_types.size(),
                    tdfg_.blocks.size()));
  for (size_t b = 0; b < plan_.block_types.size() && b < tdfg_.blocks.size(); ++b)
    if (plan_.block_types[b] != data_type_name(tdfg_.blocks[b].dtype)) {
      add(-1, ViolationKind::header,
          fmt::format("block_types[{}] is '{}', but block {} ({}) is {}", b, plan_.block_types[b], b,
                      tdfg_.blocks[b].name, data_type_name(tdfg_.blocks[b].dtype)));
      break;
    }
}

// Which host slots share host bytes (a sweep over slots by offset). Slots
// may share bytes over time, as arena buffers do; what may not happen is an
// offload overwriting a copy that is still to be read (see
// overwrite_overlapping_host_slots). Two slots of input data, which the
// program fills before the iteration, must not share bytes at all.
void Verifier::index_host_overlaps() {
  host_overlaps_.assign(plan_.host_slots.size(), {});
  std::vector<HostSlotId> order;
  for (size_t i = 0; i < plan_.host_slots.size(); ++i)
    if (slot_range_ok_[i] && plan_.host_slots[i].bytes > 0) order.push_back(static_cast<HostSlotId>(i));
  std::sort(order.begin(), order.end(), [&](HostSlotId a, HostSlotId b) {
    return plan_.host_slots[a].host_offset < plan_.host_slots[b].host_offset;
  });
  constexpr size_t kMaxPairs = size_t{1} << 20;  // hostile plans: bounded work
  size_t pairs = 0;
  std::vector<HostSlotId> open;  // slots whose range may still reach the next one
  for (HostSlotId id : order) {
    const HostSlot& h = plan_.host_slots[id];
    open.erase(std::remove_if(open.begin(), open.end(),
                              [&](HostSlotId o) {
                                const HostSlot& p = plan_.host_slots[o];
                                return p.host_offset + p.bytes <= h.host_offset;
                              }),
               open.end());
    for (HostSlotId o : open) {
      if (++pairs > kMaxPairs) {
        add(-1, ViolationKind::overlap, "more than 2^20 pairs of host slots share host bytes");
        return;
      }
      host_overlaps_[id].push_back(o);
      host_overlaps_[o].push_back(id);
      const HostSlot& p = plan_.host_slots[o];
      if (host_sourced(h.block) && host_sourced(p.block))
        add(-1, ViolationKind::overlap,
            fmt::format("host slots {} ({} {}) and {} ({} {}) of input data share host bytes from {}", o,
                        block_name(p.block), round_name(p.round), id, block_name(h.block), round_name(h.round),
                        h.host_offset));
    }
    open.push_back(id);
  }
}

// The summary's figures against those recomputed from the steps: the
// verifier reports what the plan does, never what its file claims.
void Verifier::check_summary_figures() {
  const PlanSummary& claimed = plan_.summary;
  auto wrong = [&](const std::string& what, const std::string& claimed_text, const std::string& actual) {
    add(-1, ViolationKind::header,
        fmt::format("summary.{} is {}, but the steps give {}", what, claimed_text, actual));
  };
  figures_.input_instances = static_cast<int32_t>(loaded_inputs_.size());
  if (claimed.peak_arena_bytes != figures_.peak_arena_bytes)
    wrong("peak_arena_bytes", std::to_string(claimed.peak_arena_bytes), std::to_string(figures_.peak_arena_bytes));
  if (claimed.peak_live_bytes < figures_.peak_live_bytes || claimed.peak_live_bytes > figures_.peak_arena_bytes)
    wrong("peak_live_bytes", std::to_string(claimed.peak_live_bytes),
          fmt::format("{} bytes live at once, at most the peak {}", figures_.peak_live_bytes,
                      figures_.peak_arena_bytes));
  const double fragmentation = claimed.peak_live_bytes > 0 ? static_cast<double>(claimed.peak_arena_bytes) /
                                                                     static_cast<double>(claimed.peak_live_bytes) -
                                                                 1.0
                                                           : 0.0;
  if (!std::isfinite(claimed.fragmentation) || !close_to(claimed.fragmentation, fragmentation))
    wrong("fragmentation", fmt::format("{}", claimed.fragmentation),
          fmt::format("{} (peak / live - 1)", fragmentation));
  if (claimed.offload_count != figures_.offload_count)
    wrong("offload_count", std::to_string(claimed.offload_count), std::to_string(figures_.offload_count));
  if (claimed.bytes_to_host != figures_.bytes_to_host)
    wrong("bytes_to_host", std::to_string(claimed.bytes_to_host), std::to_string(figures_.bytes_to_host));
  const int64_t loads = static_cast<int64_t>(claimed.prefetch_count) + claimed.input_load_count;
  if (claimed.prefetch_count < 0 || claimed.input_load_count < 0 || loads != figures_.load_count)
    wrong("prefetch_count + input_load_count", std::to_string(loads), std::to_string(figures_.load_count));
  else if (claimed.prefetch_count < figures_.prefetch_count_at_least ||
           claimed.input_load_count < figures_.input_instances)
    wrong("prefetch_count / input_load_count",
          fmt::format("{} / {}", claimed.prefetch_count, claimed.input_load_count),
          fmt::format("at least {} prefetches of offloaded blocks and {} first loads of input data",
                      figures_.prefetch_count_at_least, figures_.input_instances));
  const std::optional<int64_t> loaded = checked_add(claimed.bytes_to_device, claimed.input_bytes);
  if (claimed.bytes_to_device < 0 || claimed.input_bytes < 0 || !loaded || *loaded != figures_.bytes_loaded)
    wrong("bytes_to_device + input_bytes",
          loaded ? std::to_string(*loaded) : std::string("an int64 overflow"), std::to_string(figures_.bytes_loaded));
  if (!std::isfinite(claimed.simulated_ms) || !close_to(claimed.simulated_ms, figures_.simulated_ms))
    wrong("simulated_ms", fmt::format("{}", claimed.simulated_ms), fmt::format("{} (the last step's end)", figures_.simulated_ms));
  if (!std::isfinite(claimed.stall_ms) || !close_to(claimed.stall_ms, figures_.stall_ms))
    wrong("stall_ms", fmt::format("{}", claimed.stall_ms),
          fmt::format("{} (the compute stream's waits)", figures_.stall_ms));
  for (const auto& [name, value] : {std::pair<const char*, double>{"ideal_ms", claimed.ideal_ms},
                                    {"planner_ms", claimed.planner_ms}})
    if (!std::isfinite(value) || value < 0) wrong(name, fmt::format("{}", value), "a finite, non-negative time");
  if (claimed.defragmentation_count < 0)
    wrong("defragmentation_count", std::to_string(claimed.defragmentation_count), "a count (>= 0)");
  if (claimed.move_count != figures_.move_count)
    wrong("move_count", std::to_string(claimed.move_count), std::to_string(figures_.move_count));
  if (claimed.bytes_moved != figures_.bytes_moved)
    wrong("bytes_moved", std::to_string(claimed.bytes_moved), std::to_string(figures_.bytes_moved));
  // The host region is exactly the end of the host layout.
  int64_t host_end = 0;
  for (size_t i = 0; i < plan_.host_slots.size(); ++i)
    if (slot_range_ok_[i])
      host_end = std::max(host_end, checked_align_up(plan_.host_slots[i].host_offset + plan_.host_slots[i].bytes)
                                        .value_or(INT64_MAX));
  if (plan_.host_bytes != host_end)
    add(-1, ViolationKind::header,
        fmt::format("host_bytes is {}, but the host slots end at {}", plan_.host_bytes, host_end));
}

void Verifier::check_coverage_after_replay() {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    const bool update = t == tdfg_.update_task;
    for (int32_t r = update ? kOnceRound : 0; r < (update ? kOnceRound + 1 : rounds_); ++r) {
      if (compute_count_[task_round_index(t, r)] == 0)
        add(-1, ViolationKind::coverage, fmt::format("{} {} never runs", task_name(t), round_name(r)));
    }
  }
}

}  // namespace mplan::verifier
