#include "planner/policies/layer_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "frontend/bytes.h"
#include "planner/memory_manager.h"
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

struct BufferState {
  SlotSteps users = kNoSlotSteps;        // last step per slot that used it
  SlotSteps must_follow = kNoSlotSteps;  // users of the freed buffers whose memory it reuses
  int32_t last_writer = -1;
};

// A freed range and the last users of what was there (plan.h: the reuse rule).
struct DirtyRange {
  int64_t end = 0;
  SlotSteps users = kNoSlotSteps;
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
  std::vector<BufferState> bstate_;
  std::vector<BufferId> resident_buffer_;
  std::vector<HostSlot> host_slots_;
  int64_t host_bytes_ = 0;
  std::map<int64_t, DirtyRange> dirty_;
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
  BufferState bs;
  // The reuse rule: the first writer follows the last users of what was there.
  int64_t end = offset + mm_.reserved_bytes(bytes);
  auto it = dirty_.upper_bound(offset);
  if (it != dirty_.begin() && std::prev(it)->second.end > offset) --it;
  while (it != dirty_.end() && it->first < end) {
    int64_t rb = it->first;
    DirtyRange d = it->second;
    it = dirty_.erase(it);
    bs.must_follow = merge_slot_steps(bs.must_follow, d.users);
    if (rb < offset) dirty_[rb] = DirtyRange{offset, d.users};
    if (d.end > end) dirty_[end] = DirtyRange{d.end, d.users};
  }
  bstate_.push_back(bs);
  Step alloc;
  alloc.kind = StepKind::alloc;
  alloc.buffer = id;
  alloc.round = round_;
  timeline_.issue_host(std::move(alloc));
  return id;
}

void Sim::free_buffer(BufferId buf) {
  const Buffer& b = buffers_[buf];
  dirty_[b.offset] = DirtyRange{b.offset + mm_.reserved_bytes(b.bytes), bstate_[buf].users};
  mm_.free(buf);
  Step free;
  free.kind = StepKind::free;
  free.buffer = buf;
  free.round = b.round;
  timeline_.issue_host(std::move(free));
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
    s.host_slot = static_cast<HostSlotId>(host_slots_.size());
    host_slots_.push_back(HostSlot{s.host_slot, b, round_, buffers_[buf].bytes, host_bytes_});
    host_bytes_ += align_up(std::max<int64_t>(1, buffers_[buf].bytes));
  }
  Step off;
  off.kind = StepKind::offload;
  off.buffer = buf;
  off.host_slot = s.host_slot;
  off.round = round_;
  SlotSteps after = kNoSlotSteps;
  int32_t w = bstate_[buf].last_writer;
  if (w >= 0) after[timeline_.slot_of(w)] = w;
  int slot = timeline_.d2h_slot();
  int32_t step = issue_copy(std::move(off), slot, cost_.device_to_host_ms(buffers_[buf].bytes), after);
  bstate_[buf].users[slot] = step;
  s.host_writer = step;
  s.host_valid = true;
  summary_.offload_count++;
  summary_.bytes_to_host += buffers_[buf].bytes;
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
    s.host_slot = static_cast<HostSlotId>(host_slots_.size());
    host_slots_.push_back(HostSlot{s.host_slot, b, round_, bytes, host_bytes_});
    host_bytes_ += align_up(std::max<int64_t>(1, bytes));
  }
  Step pre;
  pre.kind = StepKind::prefetch;
  pre.buffer = buf;
  pre.host_slot = s.host_slot;
  pre.round = round_;
  SlotSteps after = bstate_[buf].must_follow;
  if (s.host_writer >= 0) {
    int hs = timeline_.slot_of(s.host_writer);
    after[hs] = std::max(after[hs], s.host_writer);
  }
  int slot = timeline_.h2d_slot();
  int32_t step = issue_copy(std::move(pre), slot, cost_.host_to_device_ms(bytes), after);
  bstate_[buf].must_follow = kNoSlotSteps;
  bstate_[buf].last_writer = step;
  bstate_[buf].users[slot] = step;
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
  SlotSteps after = also_after;
  auto follow = [&](int32_t a) {
    if (a >= 0) after[timeline_.slot_of(a)] = std::max(after[timeline_.slot_of(a)], a);
  };
  for (BlockId b : task.reads) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "input " + tdfg_.blocks[b].name + " not on the device");
    st.reads.push_back(buf);
    follow(bstate_[buf].last_writer);
  }
  for (BlockId b : task.writes) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "output " + tdfg_.blocks[b].name + " not on the device");
    st.writes.push_back(buf);
    for (int32_t a : bstate_[buf].users) follow(a);
    for (int32_t a : bstate_[buf].must_follow) follow(a);
  }
  if (workspace != kNoBuffer) {
    st.workspace = workspace;
    for (int32_t a : bstate_[workspace].must_follow) follow(a);
  }
  st.recompute = recompute;
  int32_t step = timeline_.issue(std::move(st), kComputeSlot, option.time_ms, after);
  for (BlockId b : task.reads) bstate_[buffer_of(b)].users[kComputeSlot] = step;
  for (BlockId b : task.writes) {
    BufferState& bs = bstate_[buffer_of(b)];
    bs.users[kComputeSlot] = step;
    bs.last_writer = step;
    bs.must_follow = kNoSlotSteps;
  }
  if (workspace != kNoBuffer) {
    bstate_[workspace].users[kComputeSlot] = step;
    bstate_[workspace].must_follow = kNoSlotSteps;
  }
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
  TaskId t = tdfg_.update_task;
  const Task& task = tdfg_.tasks[t];
  const TaskOption& o = options_of(t, 1).front();
  Step st;
  st.kind = StepKind::compute;
  st.task = t;
  st.round = kOnceRound;
  SlotSteps after = kNoSlotSteps;
  for (BlockId b : task.reads) {
    MPLAN_CHECK(tdfg_.blocks[b].resident, "the update reads a non-resident block");
    st.reads.push_back(resident_buffer_[b]);
    int32_t w = bstate_[resident_buffer_[b]].last_writer;
    if (w >= 0) after[timeline_.slot_of(w)] = std::max(after[timeline_.slot_of(w)], w);
  }
  for (BlockId b : task.writes) {
    MPLAN_CHECK(tdfg_.blocks[b].resident, "the update writes a non-resident block");
    st.writes.push_back(resident_buffer_[b]);
  }
  int32_t step = timeline_.issue(std::move(st), kComputeSlot, o.time_ms, after);
  for (BlockId b : task.writes) bstate_[resident_buffer_[b]].last_writer = step;
  TaskChoice c;
  c.task = t;
  c.round = kOnceRound;
  c.algorithm = o.algorithm;
  c.time_ms = o.time_ms;
  choices_.push_back(c);
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
  uses_.assign(nb, {});
  for (int32_t k = 0; k < n; ++k) {
    const Task& task = tdfg_.tasks[order_[k]];
    for (const std::vector<BlockId>* list : {&task.reads, &task.writes}) {
      for (BlockId b : *list) {
        if (uses_[b].empty() || uses_[b].back() != k) uses_[b].push_back(k);
      }
    }
  }
  inst_.assign(nb, Instance{});
  recompute_.assign(nb, false);
  evictable_.assign(nb, false);
  keep_recomputed_.assign(nb, true);
  resident_buffer_.assign(nb, kNoBuffer);
  int64_t resident_offset = 0;
  for (BlockId b = 0; b < nb; ++b) {
    const Block& block = tdfg_.blocks[b];
    if (!block.resident) continue;
    auto id = static_cast<BufferId>(buffers_.size());
    buffers_.push_back(Buffer{id, b, kNoTask, kOnceRound, block.bytes(1), resident_offset, true});
    bstate_.push_back(BufferState{});
    resident_buffer_[b] = id;
    resident_offset += align_up(std::max<int64_t>(1, block.bytes(1)));
  }
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

  Plan& plan = result_.plan;
  plan.arena_bytes = opt_.arena_bytes;
  plan.resident_region_bytes = resident_offset;
  plan.host_bytes = host_bytes_;
  plan.sub_batches = opt_.sub_batches;
  plan.sub_batch = opt_.sub_batches.front();
  plan.copy_engines = opt_.copy_engines;
  plan.choices = std::move(choices_);
  plan.buffers = std::move(buffers_);
  plan.host_slots = std::move(host_slots_);
  plan.event_count = timeline_.event_count();
  plan.summary = summary_;
  plan.summary.stall_ms = timeline_.stall_ms();
  plan.summary.peak_arena_bytes = mm_.peak_bytes();
  plan.summary.peak_live_bytes = mm_.peak_live_bytes();
  plan.summary.fragmentation = mm_.fragmentation();
  plan.steps = timeline_.take_steps();
  for (const Step& s : plan.steps) plan.summary.simulated_ms = std::max(plan.summary.simulated_ms, s.end_ms);
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
