#include "planner/verify.h"

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

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/bytes.h"
#include "planner/plan_limits.h"

namespace mplan {

const char* violation_kind_name(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::header: return "header";
    case ViolationKind::budget: return "budget";
    case ViolationKind::overlap: return "overlap";
    case ViolationKind::bad_step: return "bad_step";
    case ViolationKind::coverage: return "coverage";
    case ViolationKind::absent: return "absent";
    case ViolationKind::use_after_free: return "use_after_free";
    case ViolationKind::unproduced: return "unproduced";
    case ViolationKind::unprefetched: return "unprefetched";
    case ViolationKind::stale: return "stale";
    case ViolationKind::overwrite: return "overwrite";
    case ViolationKind::copy_unready: return "copy_unready";
    case ViolationKind::update_early: return "update_early";
    case ViolationKind::event: return "event";
    case ViolationKind::timing: return "timing";
  }
  return "?";
}

std::string to_string(const Violation& v) {
  if (v.step < 0) return fmt::format("plan: {}: {}", violation_kind_name(v.kind), v.message);
  return fmt::format("step {}: {}: {}", v.step, violation_kind_name(v.kind), v.message);
}

namespace {

constexpr int kDeviceStreams = 4;  // compute, h2d, d2h, copy
using Clock = std::array<int32_t, kDeviceStreams>;
constexpr Clock kNoClock = {-1, -1, -1, -1};
const char* const kSlotNames[kDeviceStreams] = {"compute", "h2d", "d2h", "copy"};

// ---- overflow-safe arithmetic (issue 12) -------------------------------------
// A plan read from a file may hold any int64: every sum and product of its
// figures is checked, so that a value near INT64_MAX is reported, never
// wrapped into a small one that passes.
std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}
std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
// align_up(bytes) without overflow, for bytes >= 0.
std::optional<int64_t> checked_align_up(int64_t bytes) {
  if (bytes < 0) return std::nullopt;
  std::optional<int64_t> padded = checked_add(bytes, kPlanAlignmentBytes - 1);
  if (!padded) return std::nullopt;
  return *padded / kPlanAlignmentBytes * kPlanAlignmentBytes;
}
// The end of the range [offset, offset + align_up(bytes)), or nullopt.
std::optional<int64_t> range_end(int64_t offset, int64_t bytes) {
  std::optional<int64_t> length = checked_align_up(bytes);
  if (!length || offset < 0) return std::nullopt;
  return checked_add(offset, *length);
}
// Doubles of a plan are finite; compares with the tolerance of summed times.
bool close_to(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

int device_slot(StreamKind stream) {
  switch (stream) {
    case StreamKind::compute: return 0;
    case StreamKind::h2d: return 1;
    case StreamKind::d2h: return 2;
    case StreamKind::copy: return 3;
    case StreamKind::host: return -1;
  }
  return -1;
}

enum class Life { unallocated, live, freed };

struct BufferState {
  Life life = Life::unallocated;
  int32_t alloc_step = -1;
  int32_t free_step = -1;
  int32_t version = -1;          // content version of its block instance it holds; -1: none
  int32_t ready_step = -1;       // the step whose write made the content valid; -1: valid from the start
  bool ready_by_prefetch = false;
  bool written = false;          // its first writer has been seen
  Clock last_use = kNoClock;     // latest user per stream (inherits must_follow)
  std::array<BufferId, kDeviceStreams> last_use_owner = {kNoBuffer, kNoBuffer, kNoBuffer, kNoBuffer};
  Clock must_follow = kNoClock;  // users of reused memory the first writer must follow
  std::array<BufferId, kDeviceStreams> must_follow_owner = {kNoBuffer, kNoBuffer, kNoBuffer, kNoBuffer};
  Clock reads_since_write = kNoClock;
  int32_t last_write_slot = -1;
};

// A block instance (block, round): how many writes were issued so far.
struct InstanceState {
  int32_t version = 0;
  int32_t last_write_step = -1;
};

struct HostSlotState {
  int32_t version = -1;     // version of the copy it holds; -1: none
  int32_t filled_step = -1; // the offload that filled it; -1: filled by the program
  // Host layout (issue 12): the offload into another slot sharing these host
  // bytes that overwrote the copy (-1: none), and the latest prefetch reading it.
  int32_t clobbered_by = -1;
  HostSlotId clobbered_via = kNoHostSlot;
  int32_t last_reader = -1;
};

struct EventState {
  int32_t recorder = -1;    // first step recording it
  int32_t record_count = 0;
  Clock end_clock = kNoClock;
  double end_ms = 0;
};

class Verifier {
 public:
  Verifier(const Plan& plan, const Tdfg& tdfg) : plan_(plan), tdfg_(tdfg) {}

  const VerifiedFigures& figures() const { return figures_; }

  std::vector<Violation> run() {
    check_header();
    check_size_limits();
    check_buffers();
    check_host_slots();
    index_host_overlaps();
    check_choices();
    if (!plan_level_ok_) return std::move(violations_);
    scan_events();
    replay();
    check_coverage_after_replay();
    check_summary_figures();
    std::stable_sort(violations_.begin(), violations_.end(),
                     [](const Violation& a, const Violation& b) { return a.step < b.step; });
    return std::move(violations_);
  }

 private:
  const Plan& plan_;
  const Tdfg& tdfg_;
  std::vector<Violation> violations_;
  bool plan_level_ok_ = true;  // false: the plan's shape is too broken to replay

  int32_t rounds_ = 0;
  std::vector<BufferState> buffers_;
  std::unordered_map<int64_t, InstanceState> instances_;
  std::vector<HostSlotState> slots_;
  std::vector<EventState> events_;
  std::vector<int32_t> step_slot_;       // device stream slot per step, -1 for host steps
  std::vector<int32_t> compute_step_of_; // per (task, round): the first compute step, -1 none
  std::vector<int32_t> compute_count_;   // per (task, round)
  std::vector<int32_t> choice_count_;    // per (task, round)
  std::vector<const TaskChoice*> choice_of_;
  int32_t update_step_ = -1;

  // Arena bookkeeping: live ranges (begin, buffer) -> end, and the painter map.
  std::map<std::pair<int64_t, BufferId>, int64_t> live_;
  int64_t max_live_length_ = 0;
  struct Segment {
    int64_t end;
    BufferId buffer;
  };
  std::map<int64_t, Segment> painted_;

  // Issue 12 bookkeeping: buffers and host slots whose ranges are valid (no
  // overflow, non-negative), the host slots sharing bytes with each slot, and
  // the figures recomputed from the steps.
  std::vector<bool> range_ok_;
  std::vector<bool> slot_range_ok_;
  std::vector<std::vector<HostSlotId>> host_overlaps_;
  VerifiedFigures figures_;
  std::set<int64_t> loaded_inputs_;  // host-sourced instances loaded at least once
  double compute_end_ms_ = 0;

  void add(int32_t step, ViolationKind kind, std::string message) {
    violations_.push_back({step, kind, std::move(message)});
  }

  // ---- names -------------------------------------------------------------
  std::string task_name(TaskId t) const {
    if (t >= 0 && t < static_cast<TaskId>(tdfg_.tasks.size())) return tdfg_.tasks[t].name;
    return fmt::format("task #{}", t);
  }
  std::string block_name(BlockId b) const {
    if (b >= 0 && b < static_cast<BlockId>(tdfg_.blocks.size())) return tdfg_.blocks[b].name;
    return fmt::format("block #{}", b);
  }
  static std::string round_name(int32_t round) {
    return round == kOnceRound ? std::string("once") : fmt::format("round {}", round);
  }
  std::string what_of(const Buffer& buffer) const {
    if (buffer.workspace_of != kNoTask) return "workspace of " + task_name(buffer.workspace_of);
    return block_name(buffer.block) + " " + round_name(buffer.round);
  }
  std::string buffer_name(BufferId id) const {
    if (!valid_buffer(id)) return fmt::format("buffer #{} (no such buffer)", id);
    const Buffer& b = plan_.buffers[id];
    const std::optional<int64_t> end = range_end(b.offset, b.bytes);
    return fmt::format("buffer {} ({}, {} at {} [{}, {}))", id, what_of(b), format_bytes(b.bytes),
                       b.resident ? "resident" : "arena", b.offset, end ? std::to_string(*end) : std::string("overflow"));
  }
  std::string step_name(int32_t s) const {
    if (s < 0 || s >= static_cast<int32_t>(plan_.steps.size())) return fmt::format("step {}", s);
    const Step& step = plan_.steps[s];
    std::string what;
    if (step.kind == StepKind::compute) {
      what = task_name(step.task) + " " + round_name(step.round);
    } else {
      what = std::string(step_kind_name(step.kind)) + " of " +
             (valid_buffer(step.buffer) ? what_of(plan_.buffers[step.buffer]) : "?");
    }
    return fmt::format("step {} ({} on {})", s, what, stream_kind_name(step.stream));
  }
  std::string stream_name(int32_t slot) const { return kSlotNames[slot]; }

  bool valid_buffer(BufferId id) const { return id >= 0 && id < static_cast<BufferId>(plan_.buffers.size()); }
  bool valid_task(TaskId t) const { return t >= 0 && t < static_cast<TaskId>(tdfg_.tasks.size()); }
  bool valid_block(BlockId b) const { return b >= 0 && b < static_cast<BlockId>(tdfg_.blocks.size()); }
  bool valid_round(int32_t r) const { return r >= 0 && r < rounds_; }
  // Index of (task, round) in the per-(task, round) tables; round kOnceRound is slot 0.
  size_t task_round_index(TaskId t, int32_t round) const {
    return static_cast<size_t>(t) * (rounds_ + 1) + static_cast<size_t>(round + 1);
  }
  int64_t instance_key(BlockId block, int32_t round) const {
    return static_cast<int64_t>(block) * (rounds_ + 2) + (round + 1);
  }
  // Blocks no task writes (the input batch and labels) come from the host.
  bool host_sourced(BlockId b) const {
    return valid_block(b) && !tdfg_.blocks[b].resident && tdfg_.blocks[b].writers.empty();
  }
  int64_t sub_batch_of(int32_t round) const {
    if (valid_round(round)) return plan_.sub_batches[round];
    return plan_.sub_batch;
  }

  static bool happens_before(int32_t x, int32_t x_slot, const Clock& clock) {
    return x_slot >= 0 && x <= clock[x_slot];
  }
  bool happens_before(int32_t x, const Clock& clock) const {
    return happens_before(x, step_slot_[x], clock);
  }

  // ---- plan-wide checks ----------------------------------------------------
  void check_header() {
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

  void check_buffers() {
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

  void check_host_slots() {
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

  void check_choices() {
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
  int32_t expected_slot(StepKind kind) const {
    switch (kind) {
      case StepKind::compute: return 0;
      case StepKind::offload: return plan_.copy_engines == 1 ? 3 : 2;
      case StepKind::prefetch: return plan_.copy_engines == 1 ? 3 : 1;
      case StepKind::alloc:
      case StepKind::free: return -1;
    }
    return -1;
  }

  void scan_events() {
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

  // ---- replay --------------------------------------------------------------
  InstanceState& instance(const Buffer& b) { return instances_[instance_key(b.block, b.round)]; }

  void init_instances() {
    // Host-sourced blocks exist on the host before their round; resident ones on the device.
    for (const Buffer& b : plan_.buffers) {
      if (b.block == kNoBlock || !valid_block(b.block)) continue;
      if (host_sourced(b.block) || b.resident) instance(b).version = std::max(instance(b).version, 1);
    }
  }

  void replay() {
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

  static double time_tolerance(double ms) { return 1e-9 * std::max(1.0, std::fabs(ms)); }

  // ---- alloc / free --------------------------------------------------------
  void do_alloc(int32_t s, const Step& step) {
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
  std::vector<BufferId> paint(int64_t begin, int64_t end, BufferId buffer) {
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

  void do_free(int32_t s, const Step& step) {
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
    st.life = Life::freed;
    st.free_step = s;
    live_.erase({b.offset, step.buffer});
    if (range_ok_[step.buffer]) figures_.live_bytes -= *range_end(b.offset, b.bytes) - b.offset;
  }

  // ---- uses ----------------------------------------------------------------
  // Common checks of a use of buffer `id` by step s: it exists, is live.
  bool usable(int32_t s, BufferId id, const char* verb) {
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

  void note_use(BufferId id, int32_t s, int k) {
    BufferState& st = buffers_[id];
    st.last_use[k] = s;
    st.last_use_owner[k] = id;
  }

  // A read of buffer `id` by step s with start clock `clock`: the buffer holds
  // the block instance's latest content, and the step that put it there
  // happens-before s. `who` says who reads, for messages.
  void check_read(int32_t s, BufferId id, const Clock& clock, const std::string& who, bool is_copy) {
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
    if (st.ready_step >= 0 && !happens_before(st.ready_step, clock)) {
      ViolationKind kind = is_copy              ? ViolationKind::copy_unready
                           : st.ready_by_prefetch ? ViolationKind::unprefetched
                                                  : ViolationKind::unproduced;
      add(s, kind,
          fmt::format("{} reads {}, but the {} {} that fills it is not ordered before it by stream order or events",
                      who, what, st.ready_by_prefetch ? "prefetch" : "producer", step_name(st.ready_step)));
    }
  }

  std::string producer_text(const Buffer& b) const {
    if (!valid_block(b.block) || tdfg_.blocks[b.block].writers.empty()) return "";
    return " (" + task_name(tdfg_.blocks[b.block].writers.front()) + ") has run";
  }

  // Write hazards of step s (stream k) writing buffer `id`.
  void check_write(int32_t s, BufferId id, int k, const Clock& clock, const std::string& who) {
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

  void after_write(int32_t s, BufferId id, int k, int32_t version, bool by_prefetch) {
    BufferState& st = buffers_[id];
    st.version = version;
    st.ready_step = s;
    st.ready_by_prefetch = by_prefetch;
    st.reads_since_write = kNoClock;
    st.last_write_slot = k;
    note_use(id, s, k);
  }

  // Checks that compute buffer `id` holds block `block` for the step's round.
  bool matches_block(int32_t s, BufferId id, BlockId block, int32_t round, const std::string& who) {
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

  void do_compute(int32_t s, const Step& step, int k, const Clock& clock) {
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
      after_write(s, id, k, inst.version, /*by_prefetch=*/false);
    }
    // The workspace: the choice's buffer, written (first) by this step.
    const TaskChoice* choice = choice_of_[cell];
    // A recomputation runs without workspace (only tasks without algorithms are recomputed).
    const BufferId want = choice != nullptr && !step.recompute ? choice->workspace : kNoBuffer;
    if (choice != nullptr && step.workspace != want)
      add(s, ViolationKind::bad_step,
          fmt::format("{} uses workspace buffer {}, but its choice names {}", who, step.workspace, want));
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
  // again), after the task's own run in the round. What it reads must be
  // current like any read; what it writes becomes the block's latest content.
  void check_recompute_step(int32_t s, const Step& step, const Task& task, size_t cell, const std::string& who) {
    if (task.kind != TaskKind::FP || task.recompute_writes.empty())
      add(s, ViolationKind::coverage,
          fmt::format("{} is recomputed, but only FP tasks with a recompute signature (Task::recompute_writes) may be",
                      who));
    else if (compute_count_[cell] == 0)
      add(s, ViolationKind::coverage, fmt::format("{} is recomputed before its first run", who));
    if (step.workspace != kNoBuffer)
      add(s, ViolationKind::bad_step, fmt::format("the recomputation of {} uses a workspace", who));
  }

  // moDNN: gradients accumulate over every round before the update (§IV-A).
  void check_update(int32_t s, const Clock& clock) {
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
  bool slot_matches(int32_t s, const Step& step) {
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

  void do_offload(int32_t s, const Step& step, int k, const Clock& clock) {
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

  void do_prefetch(int32_t s, const Step& step, int k, const Clock& clock) {
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

  // ==== issue 12: sizes, header against the TDFG, host layout, summary ====

  // The plan's tables are allocated per (task, round): bounded first.
  void check_size_limits() {
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
  void check_header_against_tdfg() {
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
  }

  // Which host slots share host bytes (a sweep over slots by offset). Slots
  // may share bytes over time, as arena buffers do; what may not happen is an
  // offload overwriting a copy that is still to be read (see
  // overwrite_overlapping_host_slots). Two slots of input data, which the
  // program fills before the iteration, must not share bytes at all.
  void index_host_overlaps() {
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

  // Offload step s wrote host slot `filled`: the copies of slots sharing its
  // bytes are gone, and no prefetch may still be reading them.
  void overwrite_overlapping_host_slots(int32_t s, HostSlotId filled, const Clock& clock) {
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
  void check_host_slot_intact(int32_t s, const Step& step) {
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
  void check_step_times(int32_t s, const Step& step) {
    if (!std::isfinite(step.start_ms) || !std::isfinite(step.end_ms) || step.start_ms < 0)
      add(s, ViolationKind::timing,
          fmt::format("start {} ms and end {} ms must be finite and not negative", step.start_ms, step.end_ms));
    else
      figures_.simulated_ms = std::max(figures_.simulated_ms, step.end_ms);
  }

  void note_arena_alloc(int64_t begin, int64_t end) {
    figures_.live_bytes += end - begin;
    figures_.peak_live_bytes = std::max(figures_.peak_live_bytes, figures_.live_bytes);
    figures_.peak_arena_bytes = std::max(figures_.peak_arena_bytes, end);
  }

  void count_copy(const Step& step) {
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

  // The summary's figures against those recomputed from the steps: the
  // verifier reports what the plan does, never what its file claims.
  void check_summary_figures() {
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

  void check_coverage_after_replay() {
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
      const bool update = t == tdfg_.update_task;
      for (int32_t r = update ? kOnceRound : 0; r < (update ? kOnceRound + 1 : rounds_); ++r) {
        if (compute_count_[task_round_index(t, r)] == 0)
          add(-1, ViolationKind::coverage, fmt::format("{} {} never runs", task_name(t), round_name(r)));
      }
    }
  }
};

}  // namespace

std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg) { return Verifier(plan, tdfg).run(); }

std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg, VerifiedFigures* figures) {
  Verifier verifier(plan, tdfg);
  std::vector<Violation> violations = verifier.run();
  if (figures != nullptr) *figures = verifier.figures();
  return violations;
}

}  // namespace mplan
