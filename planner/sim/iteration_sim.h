#pragma once
// The one iteration simulator (docs/design.md, Planner: "one iteration
// simulator, many deciders", after XLA's HeapSimulator with its
// HeapAlgorithm). It runs the FP/BP tasks once per round (sub-batch), then the
// update once, on a compute stream and copy streams (planner/streams.h),
// placing every buffer in the arena with the memory manager
// (planner/memory_manager.h). It owns the block instances, the buffers, the
// host slots and the timeline, and the primitives every policy is made of:
//
//   load      allocate and copy a block instance in from its host slot
//   evict     copy it out if the host has no current copy, then free it
//   offload   copy it out now and keep it (a later eviction is then free)
//   drop      free it without a copy; it is recomputed when next needed
//   recompute re-run the FP tasks that write it (Task::recompute_reads/writes)
//   move      copy it to another free range of the arena, on the device (compaction)
//   free      free it after its last use (liveness, done by the core)
//
// Who decides is a Decider (planner/sim/decider.h): which option a task runs
// with, what to evict when an allocation fails, what to prefetch and when,
// what to offload early or drop, where the compute stream synchronises.
// moDNN's Algorithm 1 (and mplan's own planner built on it), vDNN,
// SuperNeurons and the ideal are deciders (planner/deciders/).
//
// Allocation is reserve-then-commit: a task's outputs and workspace are
// reserved in the arena while the task is prepared and become buffers (with
// their alloc steps) only when the task is issued, so an attempt that fails
// and is retried after defragmentation leaves no buffer that nothing uses.

#include <cstdint>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "planner/memory_manager.h"
#include "planner/plan.h"
#include "planner/plan_builder.h"
#include "planner/plan_result.h"
#include "planner/sim/dynamic_options.h"
#include "planner/streams.h"
#include "planner/workspace_mode.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

class Decider;

struct SimOptions {
  std::vector<int64_t> sub_batches;  // samples per round, e.g. {48, 48, 32}
  int64_t arena_bytes = 0;
  int copy_engines = 2;              // 1: one shared copy stream; 2: one per direction
  // Placement: allocations of at least this many bytes go to the top end of
  // their best-fit segment (MemoryManager::place_large_at_top); 0: best fit.
  int64_t large_block_bytes = 0;
  // A workspace pool of this many bytes reserved at the top of the arena for
  // the whole iteration (--workspace wd:*): every conv task with a fixed
  // configuration puts its workspace at the pool's start (one compute
  // stream: one workspace in use at a time). 0: none.
  int64_t workspace_pool_bytes = 0;
  // wr / wd: the one configuration of each conv kernel (task, sub-batch).
  KernelConfigurations fixed_configurations;
  // mu-cuDNN "dynamic" (§III-C1): conv tasks also offer their desirable
  // micro-batch configurations (powerOfTwo sizes) as options.
  bool micro_batch_dynamic = false;
  // Those options computed once for every simulation of a search; null:
  // each simulation computes its own (planner/sim/dynamic_options.h).
  DynamicOptionCache* dynamic_options = nullptr;
  // > 0: give up as soon as the compute stream passes this time (the plan
  // could only end later); the plan search drops candidates early this way.
  double abandon_after_ms = 0;
};

// Runs the iteration with `decider`. The result is feasible, or says why
// not (naming the task and the bytes), or that it was abandoned; a feasible
// one has the plan's choices, buffers, host slots, steps, events and summary
// figures, and the caller (the plan search) fills its header.
PlanResult simulate_iteration(const Tdfg& tdfg, const CostModel& cost, const SimOptions& options, Decider& decider);

// A non-resident block in one round: where it is now.
struct InstanceState {
  BufferId buffer = kNoBuffer;       // its device buffer, if on the device
  HostSlotId host_slot = kNoHostSlot;
  bool host_valid = false;           // the host holds its current content
  bool created = false;              // written by a task, or loaded from host data
  // moDNN §IV-B.1 criterion (b): used since it was made or prefetched.
  bool used_since_arrival = false;
  bool dropped = false;              // freed for recomputation
  bool loaded_once = false;          // host data loaded at least once (input loads)
  int32_t host_writer = -1;          // the offload step that filled the host copy
  int64_t stamp = 0;                 // last use, for least-recently-used choices
};

// Per buffer: its ordering (plan_builder.h) and the instance it holds.
struct BufferState : BufferDeps {
  int32_t instance = -1;             // -1: a workspace or a resident block
  bool in_pool = false;              // a workspace in the wd pool
};

// An allocation request the decider must make room for.
struct RoomRequest {
  int64_t bytes = 0;
  // The stream of the step that will first write the memory (compute or h2d).
  int writer_slot = kComputeSlot;
  // Criterion (a): blocks used at positions up to here may not be evicted.
  int64_t horizon = 0;
  enum class Purpose { input, output, workspace, prefetch, recompute } purpose = Purpose::input;
};

// A place in the arena, reserved but not yet a buffer.
struct Reservation {
  AllocationId id = -1;
  int64_t offset = 0;
  int64_t bytes = 0;
};

// The simulator as deciders see it: what is where, and the primitives.
class IterationSim {
 public:
  IterationSim(const Tdfg& tdfg, const CostModel& cost, const SimOptions& options, Decider& decider);
  PlanResult run();

  // ---- the graph and the rounds -----------------------------------------------
  const Tdfg& tdfg() const { return tdfg_; }
  const CostModel& cost() const { return cost_; }
  const SimOptions& options() const { return opt_; }
  int32_t rounds() const { return static_cast<int32_t>(opt_.sub_batches.size()); }
  int64_t sub_batch(int32_t r) const { return r == kOnceRound ? 1 : opt_.sub_batches[r]; }
  // Tasks of a round, in order (the update excluded), and positions in it.
  int32_t task_count() const { return n_; }
  TaskId task_at(int32_t k) const { return order_[k]; }
  int32_t position_of(TaskId t) const { return position_of_[t]; }
  // Positions of the unrolled iteration: round r, task k -> r * n + k.
  int64_t pos(int32_t r, int32_t k) const { return static_cast<int64_t>(r) * n_ + k; }
  int64_t last_pos() const { return pos(rounds() - 1, n_ - 1); }
  int64_t here() const { return pos(cur_r_, cur_k_); }
  int32_t current_round() const { return cur_r_; }
  int32_t current_position() const { return cur_k_; }
  // Positions k in a round that read or write block b, ascending, each once.
  const std::vector<int32_t>& uses(BlockId b) const { return uses_[b]; }
  // The distinct non-resident blocks the task at position k reads (accumulated
  // outputs and in-place ones included) and the ones it creates.
  const std::vector<BlockId>& inputs_at(int32_t k) const { return inputs_[k]; }
  const std::vector<BlockId>& outputs_at(int32_t k) const { return outputs_[k]; }
  bool host_sourced(BlockId b) const { return tdfg_.blocks[b].writers.empty(); }

  // ---- instances -----------------------------------------------------------------
  int32_t instance(int32_t r, BlockId b) const { return r * block_count_ + b; }
  BlockId block_of(int32_t inst) const { return inst % block_count_; }
  int32_t round_of(int32_t inst) const { return inst / block_count_; }
  const InstanceState& state(int32_t inst) const { return inst_[inst]; }
  int64_t instance_bytes(int32_t inst) const { return tdfg_.blocks[block_of(inst)].bytes(sub_batch(round_of(inst))); }
  // The next position that uses the instance, from the current one on
  // (kNever when none); a recomputation that reads it counts as a use at the
  // position of the task that needs the recomputed block.
  int64_t next_use(int32_t inst) const;
  static constexpr int64_t kNever = INT64_MAX;
  // The instance may be dropped now and recomputed later (the decider's
  // recompute set of the round, Decider::may_drop) and its recomputation's
  // inputs live until its last use.
  bool droppable(int32_t inst) const;
  // Whether block b could be dropped and recomputed at all (before the
  // decider is asked, Decider::may_drop): an output of FP tasks with a
  // recompute signature (a convolution's only in the undivided workspace
  // mode) that a backward task reads.
  bool recomputable(BlockId b) const;
  // Simulated time of recomputing the instance: its writers' reruns (rerun_option).
  double recompute_ms(int32_t inst);
  // The option task t reruns with in round r: its first run's (`chosen`, a
  // choice; -1: not run yet, its fastest), timed as a recomputation
  // (CostModel::recompute_ms).
  TaskOption rerun_option(TaskId t, int32_t r, int32_t chosen);
  // Whether the running task (or a recomputation for it) uses the instance.
  bool locked(int32_t inst) const { return locked_.count(inst) != 0; }
  // Whether an arena segment's owner is a buffer (else a reservation of the task being prepared).
  static bool is_buffer(AllocationId owner) { return owner >= 0 && owner < kFirstReservation; }

  // ---- buffers, memory and streams -------------------------------------------
  const Buffer& buffer(BufferId id) const { return buffers_[id]; }
  const BufferState& buffer_state(BufferId id) const { return bstate_[id]; }
  const MemoryManager& memory() const { return mm_; }
  const StreamTimeline& timeline() const { return timeline_; }
  // Changes whenever a reservation is made or cancelled or an instance is used
  // (with the timeline's step count, a key for deciders' caches).
  int64_t generation() const { return generation_; }
  // Reserved bytes of a request (aligned).
  int64_t reserved_bytes(int64_t bytes) const { return mm_.reserved_bytes(bytes); }
  // Instances on the device, least recently used first.
  const std::set<std::pair<int64_t, int32_t>>& lru() const { return lru_; }
  // The task's options in round r (fastest first; wr/wd: the fixed one;
  // dynamic: with the micro-batched configurations) and the micro-batches of each.
  const std::vector<TaskOption>& options_of(TaskId t, int32_t r);
  const std::vector<MicroBatch>& micro_batches_of(TaskId t, int32_t r, size_t option);
  // The fastest option's time of the task at unrolled position p.
  double fast_time(int64_t p);
  // Whether task t's workspace in round r lies in the wd pool.
  bool in_pool(TaskId t, int32_t r) const;

  // ---- primitives ------------------------------------------------------------------
  // Reserves `request.bytes` in the arena: best fit, else the decider makes
  // room (Decider::make_room); nothing when no room can be made.
  static constexpr int64_t kBestFit = -1;  // make_room's answer "room made: place it by best fit"
  std::optional<Reservation> reserve(const RoomRequest& request);
  void cancel(const Reservation& reservation);
  // Allocates and copies in the host's content of the instance (moDNN's
  // prefetch, or an on-demand load); false when no room can be made.
  bool load(int32_t inst, const RoomRequest& request);
  // Copies the instance to the host (if the host has no current copy) and frees it.
  void evict(int32_t inst);
  // Copies the instance to the host now, keeping it on the device.
  void offload(int32_t inst);
  // Frees the instance without a copy; it is recomputed when needed.
  void drop(int32_t inst);
  // Frees the device buffer of an instance whose content is on the host or no longer needed.
  void release(int32_t inst);
  // Compaction: copies the instance on the device into a new buffer at
  // `offset` (a free range of its size), on the compute stream after the
  // steps its buffer and that range must follow, and frees the old buffer.
  void move(int32_t inst, int64_t offset);
  // Simulated time of an on-device copy of `bytes`: read and written once at
  // the model's streaming rate (streaming_ms_per_byte).
  double move_ms(int64_t bytes);
  // Counts an allocation (or a load a decider wanted) that found the bytes
  // free but no range that long (PlanResult::fragmented_allocations).
  void note_fragmented_allocation() { ++fragmented_allocations_; }
  // The freed arena ranges and the users a new buffer there must follow (plan.h's reuse rule).
  const FreedRanges& freed_ranges() const { return freed_; }
  // Makes the instance present for the running task: loads it or recomputes
  // it (and what that needs); false when no room can be made.
  bool ensure(int32_t inst);
  // The instances ensure(inst) would have to load from the host, recomputations included.
  void missing_inputs(int32_t inst, std::vector<int32_t>* out) const;

  // ---- what the decider may issue into the plan ------------------------------
  // Ordering of the next compute step after `after` (vDNN's layer-boundary synchronisation).
  void sync_compute_after(const SlotSteps& after) { extra_after_ = merge_slot_steps(extra_after_, after); }
  // The last copy step issued on each slot (-1: none).
  const SlotSteps& last_copies() const { return last_copy_; }
  PlanSummary& summary() { return summary_; }

  // Thrown by a decider (or the core) when the plan is infeasible.
  struct Infeasible {
    std::string message;
  };
  [[noreturn]] void infeasible(const std::string& what, int64_t bytes) const;

 private:
  friend class Decider;
  void start_round(int32_t r);
  void run_task(int32_t r, int32_t k);
  bool try_task(int32_t r, int32_t k, size_t* option, std::optional<Reservation>* workspace);
  void issue_task(int32_t r, int32_t k, size_t option, const std::optional<Reservation>& workspace);
  void run_update();
  void defragment(int32_t keep_inputs_of);
  BufferId commit(const Reservation& reservation, BlockId block, TaskId workspace_of, int32_t r, int32_t inst);
  void free_buffer(BufferId buf);
  void touch(int32_t inst);
  bool recompute(int32_t inst);
  int32_t compute_step(TaskId t, int32_t r, const TaskOption& option, BufferId workspace, bool recompute,
                       SlotSteps after);
  void note_pool_use(int64_t bytes, int sign);
  int64_t next_use_uncached(int32_t inst) const;

  const Tdfg& tdfg_;
  const CostModel& cost_;
  const SimOptions& opt_;
  Decider& decider_;
  int32_t block_count_ = 0;
  int64_t pool_offset_ = 0;          // start of the wd pool; arena_bytes when none
  int64_t pool_peak_end_ = 0;
  int64_t pool_live_bytes_ = 0;      // the pooled workspace in use now
  int64_t peak_live_bytes_ = 0;      // most bytes live at once, pool workspaces included
  MemoryManager mm_;
  StreamTimeline timeline_;

  std::vector<TaskId> order_;
  std::vector<int32_t> position_of_;
  int32_t n_ = 0;
  std::vector<std::vector<int32_t>> uses_;
  std::vector<std::vector<BlockId>> inputs_, outputs_;
  // Per block of the current round: droppable (Decider::may_drop) and the
  // last position it is needed at, extended for recomputations' inputs.
  std::vector<bool> may_drop_;
  std::vector<int32_t> last_use_;
  std::vector<std::vector<BlockId>> dependents_;  // per block: droppable blocks whose recomputation reads it
  std::vector<std::vector<BlockId>> frees_at_;
  mutable std::vector<int64_t> next_use_cache_;
  std::vector<InstanceState> inst_;
  std::set<int32_t> locked_;
  std::set<std::pair<int64_t, int32_t>> lru_;  // (stamp, instance) of instances on the device
  int64_t clock_ = 0;
  std::vector<Buffer> buffers_;
  std::vector<BufferState> bstate_;
  std::vector<BufferId> resident_buffer_;
  std::vector<HostSlot> host_slots_;
  int64_t host_bytes_ = 0;
  FreedRanges freed_;
  std::vector<Reservation> pending_;  // reservations of the task being prepared
  AllocationId next_reservation_ = kFirstReservation;
  static constexpr AllocationId kFirstReservation = 1 << 30;
  std::vector<std::map<int64_t, TaskOptionSet>> options_cache_;  // per task: sub-batch -> options
  std::vector<double> fast_time_cache_;  // per (round size index, position)
  std::vector<TaskChoice> choices_;
  // Per (task, round): the index of its choice in choices_, -1 before it ran.
  std::vector<int32_t> choice_at_;
  int32_t& choice_at(TaskId t, int32_t r);
  // Whether tasks with algorithms may be recomputed: in the undivided
  // workspace mode, where a recomputation can rerun its first run's option
  // with a workspace of its own (no pool, no micro-batches).
  bool algorithms_recomputable() const;
  SlotSteps extra_after_ = kNoSlotSteps;
  SlotSteps last_copy_ = kNoSlotSteps;
  PlanSummary summary_;
  std::vector<int32_t> recompute_steps_;
  std::set<BlockId> offloaded_;
  double slower_options_ms_ = 0;
  int32_t fragmented_allocations_ = 0;
  double streaming_ms_per_byte_ = -1;  // -1: not asked yet
  int32_t cur_r_ = 0, cur_k_ = 0;
  int64_t generation_ = 0;
  int64_t failed_bytes_ = 0;         // the last allocation no room could be made for
};

}  // namespace mplan
