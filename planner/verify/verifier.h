#pragma once
// The plan verifier's state and its checks (planner/verify.h), shared by
// its two halves: planner/verify/static_checks.cpp (the plan as a whole:
// header, layout, host slots, choices, events, figures) and
// planner/verify/replay.cpp (the steps replayed in issue order). Not a public header.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/bytes.h"
#include "planner/plan.h"
#include "planner/plan_limits.h"
#include "planner/verify.h"
#include "tdfg/tdfg.h"

namespace mplan::verifier {


constexpr int kDeviceStreams = 4;  // compute, h2d, d2h, copy
using Clock = std::array<int32_t, kDeviceStreams>;
constexpr Clock kNoClock = {-1, -1, -1, -1};
const char* const kSlotNames[kDeviceStreams] = {"compute", "h2d", "d2h", "copy"};

// ---- overflow-safe arithmetic: every figure of a plan is untrusted input ----
// A plan read from a file may hold any int64: every sum and product of its
// figures is checked, so that a value near INT64_MAX is reported, never
// wrapped into a small one that passes.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
// align_up(bytes) without overflow, for bytes >= 0.
inline std::optional<int64_t> checked_align_up(int64_t bytes) {
  if (bytes < 0) return std::nullopt;
  std::optional<int64_t> padded = checked_add(bytes, kPlanAlignmentBytes - 1);
  if (!padded) return std::nullopt;
  return *padded / kPlanAlignmentBytes * kPlanAlignmentBytes;
}
// The end of the range [offset, offset + align_up(bytes)), or nullopt.
inline std::optional<int64_t> range_end(int64_t offset, int64_t bytes) {
  std::optional<int64_t> length = checked_align_up(bytes);
  if (!length || offset < 0) return std::nullopt;
  return checked_add(offset, *length);
}
// Doubles of a plan are finite; compares with the tolerance of summed times.
inline bool close_to(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

inline int device_slot(StreamKind stream) {
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
  bool read_since_ready = false;  // a compute step or an offload read its content since it was made valid
};

// A block instance (block, round): how many writes were issued so far.
struct InstanceState {
  int32_t version = 0;
  int32_t last_write_step = -1;
  // Per content version: which of the block's writers (its index in
  // Block::writers) wrote it. A block shared by in-place tasks passes through
  // its writers in order; a reader must see the content its place in the
  // task order implies, recomputed or not.
  std::vector<int32_t> writer_of_version;
};

struct HostSlotState {
  int32_t version = -1;     // version of the copy it holds; -1: none
  int32_t filled_step = -1; // the offload that filled it; -1: filled by the program
  // Host layout: the offload into another slot sharing these host
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
    check_gradient_buckets();
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

  // Bookkeeping of the layout checks: buffers and host slots whose ranges are valid (no
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

  // ---- the plan as a whole (planner/verify/static_checks.cpp) ---------------
  // ---- plan-wide checks ----------------------------------------------------
  void check_header();
  void check_buffers();
  void check_host_slots();
  void check_choices();
  // ---- events --------------------------------------------------------------
  int32_t expected_slot(StepKind kind) const;
  void scan_events();
  // The plan's tables are allocated per (task, round): bounded first.
  void check_size_limits();
  // Every header figure against what the TDFG and the plan's own layout imply.
  void check_header_against_tdfg();
  // Which host slots share host bytes (a sweep over slots by offset). Slots
  // may share bytes over time, as arena buffers do; what may not happen is an
  // offload overwriting a copy that is still to be read (see
  // overwrite_overlapping_host_slots). Two slots of input data, which the
  // program fills before the iteration, must not share bytes at all.
  void index_host_overlaps();
  // The summary's figures against those recomputed from the steps: the
  // verifier reports what the plan does, never what its file claims.
  void check_summary_figures();
  void check_coverage_after_replay();
  // A data-parallel plan's buckets (planner/verify/gradient_bucket_checks.cpp).
  void check_gradient_buckets();

  // ---- the replay (planner/verify/replay.cpp) -------------------------------
  InstanceState& instance(const Buffer& b) { return instances_[instance_key(b.block, b.round)]; }
  static double time_tolerance(double ms) { return 1e-9 * std::max(1.0, std::fabs(ms)); }
  void init_instances();
  void replay();
  // ---- alloc / free --------------------------------------------------------
  void do_alloc(int32_t s, const Step& step);
  // Marks [begin, end) as last taken by `buffer`; returns the buffers that last held parts of it.
  std::vector<BufferId> paint(int64_t begin, int64_t end, BufferId buffer);
  void do_free(int32_t s, const Step& step);
  // ---- uses ----------------------------------------------------------------
  // Common checks of a use of buffer `id` by step s: it exists, is live.
  bool usable(int32_t s, BufferId id, const char* verb);
  void note_use(BufferId id, int32_t s, int k);
  // A read of buffer `id` by step s with start clock `clock`: the buffer holds
  // the block instance's latest content, and the step that put it there
  // happens-before s. `who` says who reads, for messages.
  void check_read(int32_t s, BufferId id, const Clock& clock, const std::string& who, bool is_copy);
  std::string producer_text(const Buffer& b) const;
  // Write hazards of step s (stream k) writing buffer `id`.
  void check_write(int32_t s, BufferId id, int k, const Clock& clock, const std::string& who);
  void after_write(int32_t s, BufferId id, int k, int32_t version, bool by_prefetch);
  // Checks that compute buffer `id` holds block `block` for the step's round.
  bool matches_block(int32_t s, BufferId id, BlockId block, int32_t round, const std::string& who);
  void check_writer_chain(int32_t s, BufferId id, TaskId reader, bool recompute, const std::string& who);
  void do_compute(int32_t s, const Step& step, int k, const Clock& clock);
  // SuperNeurons §3.4 recomputation (plan.h Step::recompute): a second run of
  // an FP task that has a recompute signature (Task::recompute_reads /
  // recompute_writes: batchnorm from its saved statistics, dropout's mask
  // again), after the task's own run in the round. What it reads must be
  // current like any read; what it writes becomes the block's latest content.
  void check_recompute_step(int32_t s, const Step& step, const Task& task, size_t cell, const std::string& who);
  // moDNN: gradients accumulate over every round before the update (§IV-A).
  void check_update(int32_t s, const Clock& clock);
  // The host slot of step s, checked against the device buffer.
  bool slot_matches(int32_t s, const Step& step);
  void do_offload(int32_t s, const Step& step, int k, const Clock& clock);
  void do_prefetch(int32_t s, const Step& step, int k, const Clock& clock);
  void do_move(int32_t s, const Step& step, int k, const Clock& clock);
  // Offload step s wrote host slot `filled`: the copies of slots sharing its
  // bytes are gone, and no prefetch may still be reading them.
  void overwrite_overlapping_host_slots(int32_t s, HostSlotId filled, const Clock& clock);
  // A prefetch reads a host copy that an offload into a slot sharing its bytes overwrote.
  void check_host_slot_intact(int32_t s, const Step& step);
  // Times must be finite: NaN compares false and would pass every timing check.
  void check_step_times(int32_t s, const Step& step);
  void note_arena_alloc(int64_t begin, int64_t end);
  void count_copy(const Step& step);
};

}  // namespace mplan::verifier
