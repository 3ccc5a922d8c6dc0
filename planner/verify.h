#pragma once
// The plan verifier (docs/design.md, Planner: "a separate verifier replays a plan
// without the planner's code"). It shares nothing with the scheduler beyond
// the Plan and Tdfg types: it replays the steps in issue order, derives the
// happens-before relation from the plan's own streams and events (stream FIFO
// order plus event waits, never the simulated times), and reports every
// violation it finds, not just the first.
//
// What it checks (plan.h documents the semantics it checks against):
// - header: sub-batches positive and summing to the batch, copy engines 1 or 2;
// - layout: resident region + arena <= budget, every buffer inside its region,
//   aligned, no two resident buffers overlapping, no two live arena buffers
//   overlapping;
// - every (task, round) has exactly one choice and exactly one compute step;
// - every read block is live, produced (or prefetched) by a step that
//   happens-before the reader, current (not an older copy), not freed;
// - a buffer's first writer is ordered after every user of the freed buffers
//   whose memory it reuses, and no write races a read on another stream;
// - an offload's producer has finished; a prefetch's host copy exists and its
//   offload has finished;
// - the update comes after every BP2 of every round;
// - every event is recorded exactly once, before every step that waits for it;
// - simulated times agree with stream order and events, and are finite;
// - every read of a block shared by in-place tasks sees the content its
//   place in the task order implies: a recomputation reruns the chain of
//   the block's writers from the first, in order, before any reader;
// - every sum and product of the plan's figures without int64
//   overflow; the header against the TDFG (model name and digest, task and
//   block names, resident bytes) and against its formulas (arena_bytes,
//   host_bytes); the host layout: no offload overwrites a host copy that is
//   still to be read (slots may share host bytes only over time), no two
//   input slots share bytes; every summary figure recomputed from the steps;
// - a data-parallel plan's buckets (planner/data_parallel/gradient_buckets.h):
//   every resident dW block the last round writes in exactly one bucket,
//   each bucket ready at a compute step of the last round after the last
//   write of each of its blocks, its bytes the sum of theirs.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan {

enum class ViolationKind {
  header,             // sub-batches, batch, copy engines, format version, event count
  budget,             // region sizes beyond the budget; a buffer outside its region or misaligned
  overlap,            // two live buffers (arena) or two resident buffers share bytes
  bad_step,           // ids out of range, wrong stream for the kind, buffers not matching the task
  coverage,           // a (task, round) without exactly one choice or compute step; bad choice
  absent,             // a use (read, write, copy) of a buffer that is not allocated
  use_after_free,     // a use of a buffer after it was freed
  unproduced,         // a read before the block's producer (not issued, or not ordered by events)
  unprefetched,       // a read before the prefetch that brings the block back (not issued or not ordered)
  stale,              // a read of a device copy older than the block's latest write
  overwrite,          // memory reused before the last user of the old buffer; a write racing a read
  copy_unready,       // an offload before its producer finished; a prefetch of a host copy not made or not finished
  update_early,       // the update not ordered after every BP2 of every round
  event,              // an event recorded never or twice, after a waiter, or out of range
  timing,             // simulated start/end times contradict stream order or events
  chain,              // a read of a block whose in-place writers were not (re)run in full, in order, from the first
  // A data-parallel plan's section: a resident dW block of the last round in
  // no bucket or in two, a bucket ready before a writer of its blocks, its
  // bytes or the ranks' figures wrong.
  gradient_buckets,
};
const char* violation_kind_name(ViolationKind kind);  // "overlap", "unproduced", ...

struct Violation {
  int32_t step = -1;          // the step at fault, -1 for the plan as a whole
  ViolationKind kind = ViolationKind::header;
  std::string message;        // names the task, block, buffer and the values involved
};

// "step 12: unproduced: FP(conv2) round 0 reads Y[conv1] (buffer 4) ..."
std::string to_string(const Violation& violation);

// Replays `plan` against the TDFG it was made from and returns every
// violation, in step order (plan-wide ones first); empty: the plan is valid.
// Linear in the number of steps (plus logarithmic interval lookups).
std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg);

// Figures the verifier recomputes from the steps; every one is
// compared with the plan's summary, and `mplan verify` prints these, never
// the file's own.
struct VerifiedFigures {
  int64_t peak_arena_bytes = 0;   // highest end of an allocated arena buffer
  int64_t peak_live_bytes = 0;    // most (aligned) arena bytes live at once
  int64_t live_bytes = 0;         // (replay state)
  double simulated_ms = 0;        // the last step's end
  double stall_ms = 0;            // compute-stream time spent waiting
  int32_t offload_count = 0;
  int64_t bytes_to_host = 0;
  int64_t load_count = 0;         // prefetch steps, input loads included
  int64_t bytes_loaded = 0;
  int32_t prefetch_count_at_least = 0;  // prefetches of blocks that tasks write
  int32_t input_instances = 0;    // (input block, round) instances loaded
  int32_t move_count = 0;         // on-device moves (compaction)
  int64_t bytes_moved = 0;
  // Legal but wasteful: prefetches whose buffer was freed before any step
  // read it (the bandwidth was spent for nothing), with what each was.
  int32_t prefetches_freed_unread = 0;
  int64_t bytes_prefetched_unread = 0;
  std::vector<std::string> warnings;
};
std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg, VerifiedFigures* figures);

}  // namespace mplan
