#include "planner/policies/layer_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "frontend/bytes.h"
#include "planner/memory_manager.h"
#include "planner/plan_builder.h"
#include "planner/streams.h"

namespace mplan {
namespace {

// A non-resident block's instance in the current round.
struct Instance {
  BufferId buffer = kNoBuffer;
  HostSlotId host_slot = kNoHostSlot;
  bool host_valid = false;     // the host holds its current content
  bool created = false;        // written by a task, or loaded from the host
  bool dropped = false;        // freed for recomputation (SuperNeurons §3.4)
  bool transient = false;      // recomputed memory-centric: freed after the task that needed it
  int32_t host_writer = -1;    // the offload step that filled the host copy
  int64_t stamp = 0;           // last use, for the LRU tensor cache
};

// Stops the simulation of an infeasible plan.
struct Infeasible {
  std::string message;
};

class Sim final : public LayerSim {
 public:
  Sim(const Tdfg& tdfg, const CostModel& cost, const LayerSimOptions& options, SchedulingPolicy& policy)
      : tdfg_(tdfg), cost_(cost), opt_(options), policy_(policy), mm_(options.arena_bytes, kPlanAlignmentBytes),
        timeline_(options.copy_engines) {}

  LayerSimResult run();

  // LayerSim
  const Tdfg& tdfg() const override { return tdfg_; }
  const CostModel& cost() const override { return cost_; }
  int32_t round() const override { return round_; }
  int64_t sub_batch() const override { return opt_.sub_batches[round_]; }
  int32_t position(TaskId t) const override { return position_[t]; }
  TaskId task_at(int32_t p) const override { return order_[p]; }
  int32_t task_count() const override { return static_cast<int32_t>(order_.size()); }
  bool on_device(BlockId b) const override { return inst_[b].buffer != kNoBuffer; }
  bool on_host(BlockId b) const override { return inst_[b].buffer == kNoBuffer && inst_[b].host_valid; }
  bool dropped(BlockId b) const override { return inst_[b].dropped; }
  const std::vector<int32_t>& uses(BlockId b) const override { return uses_[b]; }
  int64_t arena_bytes() const override { return opt_.arena_bytes; }

 private:
  bool host_sourced(BlockId b) const { return tdfg_.blocks[b].writers.empty(); }
  int64_t bytes_of(BlockId b) const { return tdfg_.blocks[b].bytes(sub_batch()); }
  const std::vector<TaskOption>& options_of(TaskId t, int64_t sub_batch);
  std::vector<BlockId> non_resident(const std::vector<BlockId>& blocks) const;

  void start_round();
  void run_task(int32_t k);
  void run_update();

  std::optional<int64_t> allocate(int64_t bytes, bool may_evict);
  BufferId new_buffer(BlockId block, TaskId workspace_of, int64_t bytes, int64_t offset);
  void free_buffer(BufferId buf);
  void place(BlockId b, BufferId buf);
  void release(BlockId b);  // frees the instance's device buffer
  void touch(BlockId b);
  void evict(BlockId b);
  void offload(BlockId b);
  bool load(BlockId b, bool may_evict);
  void ensure(BlockId b, const std::string& why);
  int32_t compute(TaskId t, const TaskOption& option, BufferId workspace, bool recompute,
                  const SlotSteps& also_after);
  int32_t issue_copy(Step step, int slot, double ms, const SlotSteps& after);
  [[noreturn]] void infeasible(const std::string& what, int64_t bytes) const;

  const Tdfg& tdfg_;
  const CostModel& cost_;
  const LayerSimOptions& opt_;
  SchedulingPolicy& policy_;
  MemoryManager mm_;
  StreamTimeline timeline_;

  std::vector<TaskId> order_;            // the round's tasks, the update excluded
  std::vector<int32_t> position_;        // task -> position (-1 for the update)
  std::vector<std::vector<int32_t>> uses_;
  int32_t round_ = 0;
  int32_t current_ = 0;                  // position of the task being run
  std::vector<Instance> inst_;           // per block, current round
  std::vector<bool> recompute_;          // per block, current round
  std::vector<bool> evictable_;          // per block, current round
  std::vector<bool> keep_recomputed_;
  std::vector<std::vector<BlockId>> frees_at_;  // position -> blocks whose (extended) last use it is
  std::vector<int32_t> last_use_;        // per block: last position, extended by recomputation inputs
  std::vector<BlockId> locked_;          // blocks of the running task: never evicted
  std::set<std::pair<int64_t, BlockId>> lru_;  // (stamp, block) of evictable blocks on the device
  int64_t clock_ = 0;

  std::vector<Buffer> buffers_;
  std::vector<BufferDeps> bstate_;
  std::vector<BufferId> resident_buffer_;
  std::vector<HostSlot> host_slots_;
  int64_t host_bytes_ = 0;
  FreedRanges freed_;                    // the reuse rule (plan.h)
  std::map<std::pair<TaskId, int64_t>, std::vector<TaskOption>> options_cache_;
  std::vector<TaskChoice> choices_;
  SlotSteps last_copy_ = kNoSlotSteps;   // last copy step per slot
  PlanSummary summary_;
  LayerSimResult result_;
  std::set<BlockId> offloaded_;
};

const std::vector<TaskOption>& Sim::options_of(TaskId t, int64_t sub_batch) {
  auto key = std::make_pair(t, sub_batch);
  auto it = options_cache_.find(key);
  if (it != options_cache_.end()) return it->second;
  std::vector<TaskOption> o = cost_.options(tdfg_, t, sub_batch);
  MPLAN_CHECK(!o.empty(), "cost model gave no option for " + tdfg_.tasks[t].name);
  return options_cache_.emplace(key, std::move(o)).first->second;
}

std::vector<BlockId> Sim::non_resident(const std::vector<BlockId>& blocks) const {
  std::vector<BlockId> out;
  for (BlockId b : blocks) {
    if (!tdfg_.blocks[b].resident && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  return out;
}

void Sim::infeasible(const std::string& what, int64_t bytes) const {
  throw Infeasible{fmt::format("{} in round {}: no room for {} ({}) in the arena of {} (largest free {})", what,
                               round_, format_bytes(bytes), bytes, format_bytes(opt_.arena_bytes),
                               format_bytes(mm_.largest_free_bytes()))};
}

// Places `bytes`; on failure, evicts the least recently used evictable block
// not used by the running task and retries (SuperNeurons Alg. 2, LRU.out).
std::optional<int64_t> Sim::allocate(int64_t bytes, bool may_evict) {
  auto id = static_cast<AllocationId>(buffers_.size());
  for (;;) {
    if (auto off = mm_.allocate(id, bytes)) return off;
    if (!may_evict) return std::nullopt;
    BlockId victim = kNoBlock;
    for (const auto& [stamp, b] : lru_) {
      if (std::find(locked_.begin(), locked_.end(), b) == locked_.end()) {
        victim = b;
        break;
      }
    }
    if (victim == kNoBlock) return std::nullopt;
    evict(victim);
  }
}

BufferId Sim::new_buffer(BlockId block, TaskId workspace_of, int64_t bytes, int64_t offset) {
  auto id = static_cast<BufferId>(buffers_.size());
  buffers_.push_back(Buffer{id, block, workspace_of, round_, bytes, offset, false});
  BufferDeps bs;
  // The reuse rule: the first writer follows the last users of what was there.
  bs.must_follow = freed_.take(offset, offset + mm_.reserved_bytes(bytes));
  bstate_.push_back(bs);
  timeline_.issue_host(buffer_step(StepKind::alloc, id, round_));
  return id;
}

void Sim::free_buffer(BufferId buf) {
  const Buffer& b = buffers_[buf];
  freed_.add(b.offset, b.offset + mm_.reserved_bytes(b.bytes), bstate_[buf].users);
  mm_.free(buf);
  timeline_.issue_host(buffer_step(StepKind::free, buf, b.round));
}

void Sim::place(BlockId b, BufferId buf) {
  inst_[b].buffer = buf;
  touch(b);
}

void Sim::touch(BlockId b) {
  Instance& s = inst_[b];
  if (evictable_[b] && s.buffer != kNoBuffer) lru_.erase({s.stamp, b});
  s.stamp = ++clock_;
  if (evictable_[b] && s.buffer != kNoBuffer) lru_.insert({s.stamp, b});
}

void Sim::release(BlockId b) {
  Instance& s = inst_[b];
  if (s.buffer == kNoBuffer) return;
  lru_.erase({s.stamp, b});
  free_buffer(s.buffer);
  s.buffer = kNoBuffer;
}

// Copies the instance to the host if the host has no current copy (plan.h).
void Sim::offload(BlockId b) {
  Instance& s = inst_[b];
  MPLAN_CHECK(s.buffer != kNoBuffer && s.created, "offloading a block that is not on the device");
  if (round_ == 0) offloaded_.insert(b);
  if (s.host_valid) return;
  BufferId buf = s.buffer;
  if (s.host_slot == kNoHostSlot) {
    s.host_slot = add_host_slot(host_slots_, host_bytes_, b, round_, buffers_[buf].bytes);
  }
  int slot = timeline_.d2h_slot();
  int32_t step = issue_copy(buffer_step(StepKind::offload, buf, round_, s.host_slot), slot,
                            cost_.device_to_host_ms(buffers_[buf].bytes),
                            offload_predecessors(timeline_, bstate_[buf]));
  record_offload(bstate_[buf], slot, step, buffers_[buf].bytes, summary_);
  s.host_writer = step;
  s.host_valid = true;
}

void Sim::evict(BlockId b) {
  offload(b);
  release(b);
}

int32_t Sim::issue_copy(Step step, int slot, double ms, const SlotSteps& after) {
  int32_t index = timeline_.issue(std::move(step), slot, ms, after);
  last_copy_[slot] = index;
  return index;
}

// Allocates and copies the host's content in; false if it does not fit.
bool Sim::load(BlockId b, bool may_evict) {
  Instance& s = inst_[b];
  int64_t bytes = bytes_of(b);
  auto off = allocate(bytes, may_evict);
  if (!off) return false;
  BufferId buf = new_buffer(b, kNoTask, bytes, *off);
  bool input_data = host_sourced(b) && !s.created;
  if (s.host_slot == kNoHostSlot) {
    MPLAN_CHECK(host_sourced(b), "loading a block with no host copy");
    s.host_slot = add_host_slot(host_slots_, host_bytes_, b, round_, bytes);
  }
  int slot = timeline_.h2d_slot();
  int32_t step = issue_copy(buffer_step(StepKind::prefetch, buf, round_, s.host_slot), slot,
                            cost_.host_to_device_ms(bytes),
                            prefetch_predecessors(timeline_, bstate_[buf], s.host_writer));
  record_prefetch(bstate_[buf], slot, step);
  s.created = true;
  s.host_valid = true;
  place(b, buf);
  if (input_data) {
    summary_.input_load_count++;
    summary_.input_bytes += bytes;
  } else {
    summary_.prefetch_count++;
    summary_.bytes_to_device += bytes;
  }
  return true;
}

// Makes block b present for the running task: loads it from the host, or
// recomputes it (and what it needs) if it was dropped; may evict.
void Sim::ensure(BlockId b, const std::string& why) {
  Instance& s = inst_[b];
  if (s.buffer != kNoBuffer) {
    touch(b);
    return;
  }
  if (s.dropped) {
    // SuperNeurons §3.4: re-run the forward task from the nearest kept inputs.
    TaskId f = tdfg_.fp_of[tdfg_.blocks[b].layer];
    const Task& task = tdfg_.tasks[f];
    for (BlockId x : non_resident(task.reads)) {
      if (std::find(locked_.begin(), locked_.end(), x) == locked_.end()) locked_.push_back(x);
      ensure(x, why);
    }
    int64_t bytes = bytes_of(b);
    auto off = allocate(bytes, /*may_evict=*/true);
    if (!off) infeasible(why + ": recomputing " + tdfg_.blocks[b].name, bytes);
    place(b, new_buffer(b, kNoTask, bytes, *off));
    // Recomputable tasks have one option and no workspace (layer_sim.h).
    const TaskOption& o = options_of(f, sub_batch()).front();
    int32_t step = compute(f, o, kNoBuffer, /*recompute=*/true, kNoSlotSteps);
    result_.recompute_steps.push_back(step);
    result_.recomputed_tasks++;
    s.dropped = false;
    s.created = true;
    s.host_valid = false;
    s.transient = !keep_recomputed_[b];
    return;
  }
  MPLAN_CHECK(s.host_valid || (host_sourced(b) && !s.created),
              "block " + tdfg_.blocks[b].name + " is neither on the device, on the host nor recomputable");
  if (!load(b, /*may_evict=*/true)) infeasible(why + ": loading " + tdfg_.blocks[b].name, bytes_of(b));
}

int32_t Sim::compute(TaskId t, const TaskOption& option, BufferId workspace, bool recompute,
                     const SlotSteps& also_after) {
  const Task& task = tdfg_.tasks[t];
  Step st;
  st.kind = StepKind::compute;
  st.task = t;
  st.round = round_;
  auto buffer_of = [&](BlockId b) {
    return tdfg_.blocks[b].resident ? resident_buffer_[b] : inst_[b].buffer;
  };
  for (BlockId b : task.reads) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "input " + tdfg_.blocks[b].name + " not on the device");
    st.reads.push_back(buf);
  }
  for (BlockId b : task.writes) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "output " + tdfg_.blocks[b].name + " not on the device");
    st.writes.push_back(buf);
  }
  st.workspace = workspace;
  st.recompute = recompute;
  const SlotSteps after = compute_predecessors(timeline_, st, bstate_, also_after);
  int32_t step = timeline_.issue(std::move(st), kComputeSlot, option.time_ms, after);
  record_compute(timeline_.step(step), step, bstate_);
  for (BlockId b : non_resident(task.writes)) {
    Instance& s = inst_[b];
    s.created = true;
    s.host_valid = false;
  }
  return step;
}

// Per round: which blocks are recomputed and evictable (asked once), and the
// last use of each block, extended so that the inputs of a recomputation
// live (on the device or the host) until the recomputed block's last use.
void Sim::start_round() {
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  auto n = static_cast<int32_t>(order_.size());
  for (BlockId b = 0; b < nb; ++b) inst_[b] = Instance{};
  lru_.clear();
  policy_.start_round(*this, round_);
  for (BlockId b = 0; b < nb; ++b) {
    evictable_[b] = !tdfg_.blocks[b].resident && !uses_[b].empty() && policy_.evictable(*this, b);
  }
  last_use_.assign(nb, -1);
  for (BlockId b = 0; b < nb; ++b) {
    if (!uses_[b].empty()) last_use_[b] = uses_[b].back();
  }
  // Recomputable: an output whose FP task writes it alone and nothing else,
  // used after its forward uses, whose inputs are kept anyway (evictable
  // checkpoints, host data) or recomputable themselves.
  for (int32_t k = 0; k < n; ++k) {
    const Task& task = tdfg_.tasks[order_[k]];
    if (task.kind != TaskKind::FP || task.writes.size() != 1 || task.has_algorithms) continue;
    BlockId y = task.writes.front();
    const Block& block = tdfg_.blocks[y];
    if (block.resident || block.kind != BlockKind::output || block.writers.size() != 1) continue;
    bool later = false;
    for (int32_t p : uses_[y]) later = later || tdfg_.tasks[order_[p]].kind != TaskKind::FP;
    if (!later) continue;
    bool inputs_kept = true;
    for (BlockId x : non_resident(task.reads)) {
      inputs_kept = inputs_kept && (evictable_[x] || recompute_[x] || host_sourced(x));
    }
    if (!inputs_kept || !policy_.recompute(*this, y)) continue;
    recompute_[y] = true;
    keep_recomputed_[y] = policy_.keep_recomputed(*this, y);
  }
  for (int32_t k = n - 1; k >= 0; --k) {
    const Task& task = tdfg_.tasks[order_[k]];
    if (task.kind != TaskKind::FP || task.writes.size() != 1 || !recompute_[task.writes.front()]) continue;
    for (BlockId x : non_resident(task.reads)) {
      last_use_[x] = std::max(last_use_[x], last_use_[task.writes.front()]);
    }
  }
  frees_at_.assign(n, {});
  for (BlockId b = 0; b < nb; ++b) {
    if (last_use_[b] >= 0 && !tdfg_.blocks[b].resident) frees_at_[last_use_[b]].push_back(b);
  }
}

void Sim::run_task(int32_t k) {
  current_ = k;
  TaskId t = order_[k];
  const Task& task = tdfg_.tasks[t];
  // vDNN §III-B: the compute stream waits for the copies issued before this layer boundary.
  SlotSteps sync = kNoSlotSteps;
  if (policy_.sync_before(*this, t)) sync = last_copy_;
  std::vector<BlockId> inputs = non_resident(task.reads);
  std::vector<BlockId> outputs;
  for (BlockId b : non_resident(task.writes)) {
    if (std::find(inputs.begin(), inputs.end(), b) == inputs.end()) {
      // A later writer of an accumulated block reads it too.
      if (tdfg_.blocks[b].writers.front() != t) inputs.push_back(b);
      else outputs.push_back(b);
    }
  }
  locked_ = inputs;
  locked_.insert(locked_.end(), outputs.begin(), outputs.end());
  // Prefetches the policy asks for, overlapping this task; skipped if they do not fit.
  for (BlockId b : policy_.prefetch_before(*this, t)) {
    if (on_host(b)) load(b, /*may_evict=*/false);
  }
  const std::string why = "task " + task.name;
  for (BlockId b : inputs) ensure(b, why);
  for (BlockId b : outputs) {
    if (inst_[b].buffer != kNoBuffer) continue;
    int64_t bytes = bytes_of(b);
    auto off = allocate(bytes, /*may_evict=*/true);
    if (!off) infeasible(why + ": output " + tdfg_.blocks[b].name, bytes);
    place(b, new_buffer(b, kNoTask, bytes, *off));
  }
  const std::vector<TaskOption>& opts = options_of(t, sub_batch());
  size_t pick = policy_.choose_option(*this, t, opts, mm_.largest_free_bytes());
  if (pick >= opts.size()) infeasible(why + ": no algorithm fits", 0);
  const TaskOption& o = opts[pick];
  TaskChoice choice;
  choice.task = t;
  choice.round = round_;
  choice.sub_batch = sub_batch();
  choice.algorithm = o.algorithm;
  choice.time_ms = o.time_ms;
  choice.workspace_bytes = o.workspace_bytes;
  BufferId workspace = kNoBuffer;
  if (o.workspace_bytes > 0) {
    auto off = allocate(o.workspace_bytes, /*may_evict=*/false);
    if (!off) infeasible(why + ": workspace of " + o.algorithm, o.workspace_bytes);
    workspace = new_buffer(kNoBlock, t, o.workspace_bytes, *off);
    choice.workspace = workspace;
    choice.workspace_offset = *off;
  }
  // Offloads overlapping this task (vDNN: a layer's X during its forward pass).
  std::vector<BlockId> offloads = policy_.offload_with(*this, t);
  for (BlockId b : offloads) {
    if (on_device(b)) offload(b);
  }
  compute(t, o, workspace, /*recompute=*/false, sync);
  choices_.push_back(choice);
  for (BlockId b : inputs) touch(b);
  for (BlockId b : outputs) touch(b);

  // Frees: the workspace, the offloaded blocks, transient recomputations,
  // blocks dropped for recomputation after their forward use, dead blocks.
  if (workspace != kNoBuffer) free_buffer(workspace);
  for (BlockId b : offloads) release(b);
  for (BlockId b : locked_) {
    Instance& s = inst_[b];
    if (s.buffer == kNoBuffer || last_use_[b] <= k) continue;
    auto next = std::upper_bound(uses_[b].begin(), uses_[b].end(), k);
    bool backward_next = next != uses_[b].end() && tdfg_.tasks[order_[*next]].kind != TaskKind::FP;
    if (s.transient || (recompute_[b] && task.kind == TaskKind::FP && backward_next)) {
      release(b);
      s.dropped = true;
      s.transient = false;
    }
  }
  for (BlockId b : frees_at_[k]) {
    release(b);
    inst_[b].dropped = false;
  }
  locked_.clear();
}

void Sim::run_update() {
  const TaskOption& o = options_of(tdfg_.update_task, 1).front();
  choices_.push_back(issue_update(tdfg_, o, resident_buffer_, timeline_, bstate_));
}

LayerSimResult Sim::run() {
  MPLAN_CHECK(!opt_.sub_batches.empty(), "no rounds");
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  position_.assign(tdfg_.tasks.size(), -1);
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    if (t == tdfg_.update_task) continue;
    position_[t] = static_cast<int32_t>(order_.size());
    order_.push_back(t);
  }
  auto n = static_cast<int32_t>(order_.size());
  uses_ = block_uses(tdfg_, order_);
  inst_.assign(nb, Instance{});
  recompute_.assign(nb, false);
  evictable_.assign(nb, false);
  keep_recomputed_.assign(nb, true);
  const int64_t resident_offset = place_resident_blocks(tdfg_, buffers_, resident_buffer_);
  bstate_.resize(buffers_.size());
  try {
    for (round_ = 0; round_ < static_cast<int32_t>(opt_.sub_batches.size()); ++round_) {
      recompute_.assign(nb, false);
      start_round();
      for (int32_t k = 0; k < n; ++k) run_task(k);
      for (BlockId b = 0; b < nb; ++b) {
        MPLAN_CHECK(inst_[b].buffer == kNoBuffer, "block " + tdfg_.blocks[b].name + " outlives its round");
      }
    }
  } catch (const Infeasible& e) {
    LayerSimResult out;
    out.feasible = false;
    out.failure = e.message;
    return out;
  }
  if (tdfg_.update_task != kNoTask) run_update();

  result_.plan = finish_plan(SimulatedParts{opt_.arena_bytes, resident_offset, host_bytes_, opt_.sub_batches,
                                             opt_.copy_engines, std::move(choices_), std::move(buffers_),
                                             std::move(host_slots_), summary_},
                              timeline_, mm_);
  result_.feasible = true;
  result_.offloaded_blocks.assign(offloaded_.begin(), offloaded_.end());
  return std::move(result_);
}

}  // namespace

LayerSimResult simulate_layerwise(const Tdfg& tdfg, const CostModel& cost, const LayerSimOptions& options,
                                  SchedulingPolicy& policy) {
  return Sim(tdfg, cost, options, policy).run();
}

}  // namespace mplan
