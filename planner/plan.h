#pragma once
// The Plan: everything the planner decided for one training iteration, as
// self-contained plain data (ids, no pointers). The verifier replays it
// without the planner's code, plan.json stores it, codegen turns every step
// into one line of the generated program.
//
// Device memory layout (bytes from the start of the program's one device
// allocation of budget_bytes):
//
//   [0, resident_region_bytes)                       resident region: weights, dW,
//                                                    optimizer state (moDNN SW),
//                                                    each at a fixed aligned offset
//   [resident_region_bytes, +arena_bytes)            arena: every other buffer
//
// Buffer::offset is relative to the start of its region (resident or arena).
// arena_bytes = align_down(budget_bytes - resident_region_bytes, 256).
// Every offset is a multiple of kPlanAlignmentBytes, and a buffer occupies
// [offset, offset + align_up(bytes, kPlanAlignmentBytes)) of its region.
//
// Rounds: the TDFG holds one sub-batch; the plan runs the FP/BP tasks once per
// sub-batch r = 0..sub_batches.size()-1 (gradients accumulate in the resident
// dW blocks), then the update once (round kOnceRound). A non-resident block
// instance is (block, round); resident blocks and blocks shared by all rounds
// use round kOnceRound.
//
// Steps are in issue order (the static program order). Semantics:
// - Each stream runs its steps FIFO: a step starts after the previous step of
//   its stream has ended and after every event in `waits` has been recorded.
// - `records` is recorded when the step ends (kNoEvent: none). Every event id
//   is recorded by exactly one step, and that step comes before every step
//   that waits for it in issue order.
// - alloc and free (stream host) are bookkeeping at issue time: alloc makes a
//   buffer's range usable from that point of the program; free ends it. They
//   take no time (start_ms == end_ms == the simulated issue time).
// - A freed buffer's memory may be reused by a later buffer only if the later
//   buffer's first writer (compute task or prefetch) is ordered after every
//   user of the freed buffer: by waiting for an event recorded by (or after,
//   on the same stream as) that user, or by running after it on the same stream.
// - offload (d2h) copies a device buffer to its host slot; prefetch (h2d)
//   copies a host slot into a device buffer. A block instance is copied to the
//   host only when the host has no current copy of it (never, or written
//   since); later evictions of it are plain frees (moDNN §IV-B.1).
// - move (compute stream) copies a block instance from one device buffer
//   (reads[0]) to another of the same block and round (writes[0], also
//   `buffer`), on the device: compaction, so that a later allocation finds
//   one free range without a round trip over PCIe. Both buffers are live
//   during the move (their ranges are disjoint); the source is freed after it.
// - Blocks with no writer task (the input batch X and the labels) come from
//   the host: each round's first use is preceded by a prefetch from the host
//   slot of (block, round), which the program fills with that sub-batch's data.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tdfg/tdfg.h"

namespace mplan {

inline constexpr int kPlanFormatVersion = 1;
// Every device offset is a multiple of this (cudaMalloc's own alignment).
inline constexpr int64_t kPlanAlignmentBytes = 256;

using BufferId = int32_t;
using EventId = int32_t;
using HostSlotId = int32_t;
inline constexpr BufferId kNoBuffer = -1;
inline constexpr EventId kNoEvent = -1;
inline constexpr HostSlotId kNoHostSlot = -1;
// The round of the update task, of resident blocks and of blocks shared by all rounds.
inline constexpr int32_t kOnceRound = -1;

inline int64_t align_up(int64_t bytes, int64_t alignment = kPlanAlignmentBytes) {
  return (bytes + alignment - 1) / alignment * alignment;
}
inline int64_t align_down(int64_t bytes, int64_t alignment = kPlanAlignmentBytes) {
  return bytes / alignment * alignment;
}

enum class StepKind { compute, offload, prefetch, alloc, free, move };
// compute: the compute stream. h2d / d2h: one copy stream per direction
// (copy_engines == 2). copy: the one shared copy stream (copy_engines == 1,
// moDNN's StrmD). host: alloc and free.
enum class StreamKind { compute, h2d, d2h, copy, host };
const char* step_kind_name(StepKind kind);        // "compute", "offload", ...
const char* stream_kind_name(StreamKind kind);    // "compute", "h2d", "d2h", "copy", "host"
// Inverse of the above; false if the name is unknown.
bool parse_step_kind(const std::string& name, StepKind* kind);
bool parse_stream_kind(const std::string& name, StreamKind* kind);

// One allocation of a block instance (or of a task's workspace).
struct Buffer {
  BufferId id = kNoBuffer;      // index in Plan::buffers
  BlockId block = kNoBlock;     // kNoBlock for a workspace
  TaskId workspace_of = kNoTask;  // the task whose workspace it is, else kNoTask
  int32_t round = 0;            // sub-batch index, or kOnceRound
  int64_t bytes = 0;            // exact bytes (the reserved range is align_up(bytes))
  int64_t offset = 0;           // in the arena, or in the resident region if resident
  // Resident buffers (weights, dW, optimizer state) live for the whole run at
  // a fixed offset in the resident region; they have no alloc, free or copy steps.
  bool resident = false;
};

// Pinned host memory for one offloaded block instance (or one round's input
// data); host_offset is within a host region of Plan::host_bytes.
struct HostSlot {
  HostSlotId id = kNoHostSlot;
  BlockId block = kNoBlock;
  int32_t round = 0;
  int64_t bytes = 0;
  int64_t host_offset = 0;
};

// One micro-batch of a micro-batched convolution (mu-cuDNN); empty list: the
// task runs on the whole sub-batch with TaskChoice::algorithm.
struct MicroBatch {
  int64_t size = 0;
  std::string algorithm;
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

// The option chosen for one task in one round (moDNN Eq. 5 for conv tasks).
struct TaskChoice {
  TaskId task = kNoTask;
  int32_t round = 0;            // kOnceRound for the update
  int64_t sub_batch = 0;        // samples in this round
  std::string algorithm;        // "default" for tasks without algorithms
  double time_ms = 0;
  int64_t workspace_bytes = 0;
  BufferId workspace = kNoBuffer;  // kNoBuffer when workspace_bytes == 0
  int64_t workspace_offset = -1;   // arena offset of the workspace, -1 if none
  std::vector<MicroBatch> micro_batches;
  // Eq. 5 gain of the chosen option over the leanest one (0 when there was no choice).
  double gain_ms = 0;
};

struct Step {
  int32_t index = 0;            // position in Plan::steps
  StepKind kind = StepKind::compute;
  StreamKind stream = StreamKind::compute;
  TaskId task = kNoTask;        // compute: the task
  int32_t round = 0;            // compute: the round (kOnceRound for update); others: the buffer's round
  // alloc / free: the buffer; offload: the device source; prefetch and move: the device destination.
  BufferId buffer = kNoBuffer;
  HostSlotId host_slot = kNoHostSlot;  // offload: destination; prefetch: source
  // compute: the buffers of Task::reads and Task::writes, in the same order
  // (resident blocks included), and the workspace (kNoBuffer if none).
  // move: reads = {source}, writes = {destination}.
  std::vector<BufferId> reads;
  std::vector<BufferId> writes;
  BufferId workspace = kNoBuffer;
  std::vector<EventId> waits;
  EventId records = kNoEvent;
  double start_ms = 0;
  double end_ms = 0;
  // compute: this step re-runs an FP task of the round because a block it
  // writes was dropped after the forward pass and is needed again
  // (SuperNeurons §3.4 recomputation). Its reads and writes are the buffers
  // of the task's recompute signature (Task::recompute_reads and
  // recompute_writes, in that order): batchnorm recomputes Y from X, W and the
  // saved statistics without touching the running ones; dropout writes Y and
  // its mask again. It has no workspace and no choice of its own.
  bool recompute = false;
};

struct PlanSummary {
  double simulated_ms = 0;      // end of the last step
  double ideal_ms = 0;          // unlimited memory, fastest options, full batch as one sub-batch
  int64_t peak_arena_bytes = 0; // highest end of any buffer range in the arena
  int64_t peak_live_bytes = 0;  // most bytes live at once in the arena (lower bound for the peak)
  double fragmentation = 0;     // peak_arena_bytes / peak_live_bytes - 1 (0: none)
  int64_t bytes_to_host = 0;
  int64_t bytes_to_device = 0;  // prefetches of offloaded blocks (input data not included)
  int32_t offload_count = 0;
  int32_t prefetch_count = 0;   // prefetches of offloaded blocks (input data not included)
  // Prefetch steps that load a round's input batch or labels from the host.
  int32_t input_load_count = 0;
  int64_t input_bytes = 0;
  int32_t defragmentation_count = 0;
  // On-device moves (compaction) and the bytes they copied.
  int32_t move_count = 0;
  int64_t bytes_moved = 0;
  double stall_ms = 0;          // compute-stream time spent waiting for copies
  double planner_ms = 0;        // wall time the planner took
  std::vector<std::string> notes;  // e.g. "batchnorm statistics are per sub-batch"
};

// Data-parallel training on several GPUs (docs/multi-gpu.md): every rank runs
// a plan of its share of the global batch, and the resident weight gradients
// are summed over the ranks, bucket by bucket, before the update (PyTorch
// DDP's gradient buckets; with several rounds only the last round's sums are
// all-reduced, as DDP's no_sync does).
struct GradientBucket {
  std::vector<BlockId> blocks;  // resident dW blocks, in the order the last round's backward pass finishes them
  int64_t bytes = 0;            // their bytes together
  // The compute step (of the last round) after which every block of the
  // bucket holds its final sum over this rank's rounds: its all-reduce may
  // start then. The update waits for every bucket.
  int32_t ready_after_step = -1;
  double start_ms = 0;          // the simulated all-reduce, on its own stream
  double end_ms = 0;
};

// How a rank fared in the joint step (planner/data_parallel/rank_timing.h).
struct RankFigures {
  double finish_ms = 0;      // its last step's end
  double copy_ms = 0;        // its copies' durations, summed
  double alone_copy_ms = 0;  // the same copies' durations in its plan, alone on the machine
};

// What a link carried in the joint step: its busiest moment (`mplan inspect`).
struct LinkUse {
  std::string link;             // "node 0 switch sw0 uplink, to the host"
  std::string kind;             // "PCIe", "PCIe switch uplink", "host memory", "NVLink", "NVSwitch", "network"
  int32_t peak_transfers = 0;   // the most transfers on it at once
  double peak_at_ms = 0;        // when it first carried that many
  double busy_ms = 0;           // time it carried at least one
  double bytes = 0;             // bytes it carried
};

struct DataParallel {
  int32_t ranks = 1;            // 1: a single-GPU plan (plan.json has no "data_parallel")
  int32_t rank = 0;             // the rank whose plan this is
  int64_t global_batch = 0;     // ranks x Plan::batch: the loss is the mean over all of it
  std::string machine;          // the machine file's name, or how the GPUs were assumed
  std::string policy;           // how the ranks' plans were made (docs/multi-gpu.md, "Policies")
  // Per rank: the rank whose plan it runs (its own where its plan differs
  // from every lower rank's; plan.json holds rank 0's, plan-rank-<r>.json rank r's).
  std::vector<int32_t> plan_of_rank;
  std::vector<GradientBucket> buckets;
  int64_t bucket_bytes = 0;     // the bucket size the buckets were cut at
  double step_ms = 0;           // the simulated step of all ranks together (contention and all-reduce included)
  std::vector<RankFigures> rank_figures;  // per rank
  std::vector<LinkUse> links;   // the links that carried most at once, busiest first (at most kReportedLinks)
};
inline constexpr size_t kReportedLinks = 8;

struct Plan {
  int format_version = kPlanFormatVersion;
  std::string model_name;
  std::string model_digest;     // model_digest(model) (ops/model.h): 16 hex digits
  // The layers planned with their memory-saving backward (Layer::compact_backward,
  // tdfg/compact_backward.h), by name: the TDFG is the model's with these set.
  std::vector<std::string> compact_backward_layers;
  // A 16-bit model's weight copies are made where each task uses them
  // (Model::weight_copies_where_used), not kept resident: the TDFG is the
  // model's with that set. plan.json "weight_copies": "where_used".
  bool weight_copies_where_used = false;
  // The plan of the evaluation pass (tdfg/tdfg.h TdfgOptions::evaluation),
  // not of a training step: its TDFG is the model's forward pass alone.
  // plan.json "graph": "evaluation".
  bool evaluation = false;
  std::string device;           // CostModel::describe()
  // Which cost model planned (CostModel::info()), so that nobody mistakes a
  // prediction for a measurement: "analytic" (with the calibration's expected
  // error), "measured", or "unknown" (not filled). The math mode is the one
  // convolutions and GEMMs were costed in; the generated program must run them
  // in it (docs/plan-format.md, "cost_model").
  std::string cost_model_kind = "unknown";
  std::string math_mode = "fp32";
  std::string cost_model_error;
  int64_t budget_bytes = 0;
  int64_t resident_bytes = 0;          // sum of resident blocks' bytes (SW)
  int64_t resident_region_bytes = 0;   // with each block aligned; arena starts here
  int64_t arena_bytes = 0;
  int64_t host_bytes = 0;              // pinned host region for all host slots
  int64_t batch = 0;                   // B
  int64_t sub_batch = 0;               // b
  std::vector<int64_t> sub_batches;    // per round; sums to B (e.g. [48, 48, 32])
  int copy_engines = 2;                // 1: one shared copy stream; 2: one per direction
  DataParallel data_parallel;          // ranks == 1: a single-GPU plan

  std::vector<TaskChoice> choices;     // per (task, round), rounds in order, update last
  std::vector<Buffer> buffers;         // indexed by BufferId; resident buffers first
  std::vector<HostSlot> host_slots;    // indexed by HostSlotId
  std::vector<Step> steps;             // issue order
  int32_t event_count = 0;             // events are 0..event_count-1
  PlanSummary summary;
  // Names of the TDFG's tasks and blocks, indexed by id (Task::name, Block::name),
  // so that `mplan inspect` can explain a plan without the model. Empty when
  // not filled (cmd_compile fills them from the Tdfg).
  std::vector<std::string> task_names;
  std::vector<std::string> block_names;
  // The type of each block's elements (Block::dtype's name: "float32",
  // "bfloat16", ...), indexed by id; filled for 16-bit models only, whose
  // blocks are not all float32 (docs/model-format.md, "Precision").
  std::vector<std::string> block_types;
};

// The host slot of a block instance (block, round); kNoHostSlot if it has none.
HostSlotId host_slot_of(const Plan& plan, BlockId block, int32_t round);

// The plan's choices by (task, round), indexed once: looking each step's
// choice up by a scan of Plan::choices is quadratic in the plan's size
// (ResNet-1001 at sub-batch 1: 555,776 task runs, minutes).
class ChoiceIndex {
 public:
  explicit ChoiceIndex(const Plan& plan);
  // The choice for (task, round), or nullptr.
  const TaskChoice* find(TaskId task, int32_t round) const;

 private:
  std::unordered_map<uint64_t, const TaskChoice*> by_key_;
};

}  // namespace mplan
