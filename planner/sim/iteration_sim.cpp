#include "planner/sim/iteration_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/bytes.h"
#include "planner/prefetch_pruning.h"
#include "planner/sim/decider.h"
#include "planner/sim/dynamic_options.h"

namespace mplan {
namespace {

bool contains(const std::vector<BlockId>& list, BlockId b) { return std::find(list.begin(), list.end(), b) != list.end(); }

// The distinct non-resident blocks a task reads (accumulated and in-place
// outputs included) and the ones it creates.
void task_blocks(const Tdfg& tdfg, TaskId t, std::vector<BlockId>* inputs, std::vector<BlockId>* outputs) {
  const Task& task = tdfg.tasks[t];
  for (BlockId b : task.reads) {
    if (!tdfg.blocks[b].resident && !contains(*inputs, b)) inputs->push_back(b);
  }
  for (BlockId b : task.writes) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || contains(*inputs, b) || contains(*outputs, b)) continue;
    // A later writer of an accumulated block reads it too.
    if (!block.writers.empty() && block.writers.front() != t) inputs->push_back(b);
    else outputs->push_back(b);
  }
}

}  // namespace

IterationSim::IterationSim(const Tdfg& tdfg, const CostModel& cost, const SimOptions& options, Decider& decider)
    : tdfg_(tdfg), cost_(cost), opt_(options), decider_(decider),
      block_count_(static_cast<int32_t>(tdfg.blocks.size())),
      pool_offset_(options.arena_bytes - (options.workspace_pool_bytes > 0 ? align_up(options.workspace_pool_bytes) : 0)),
      mm_(std::max<int64_t>(0, pool_offset_), kPlanAlignmentBytes),
      timeline_(options.copy_engines, options.copy_engines == 2 ? cost.duplex_slowdown() : 1.0) {
  MPLAN_CHECK(!opt_.sub_batches.empty(), "the iteration has no rounds");
  MPLAN_CHECK(pool_offset_ > 0, "the workspace pool leaves no arena");
  if (opt_.large_block_bytes > 0) mm_.place_large_at_top(opt_.large_block_bytes);
  position_of_.assign(tdfg_.tasks.size(), -1);
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    if (t == tdfg_.update_task) continue;
    position_of_[t] = static_cast<int32_t>(order_.size());
    order_.push_back(t);
  }
  n_ = static_cast<int32_t>(order_.size());
  uses_ = block_uses(tdfg_, order_);
  inputs_.resize(n_);
  outputs_.resize(n_);
  for (int32_t k = 0; k < n_; ++k) task_blocks(tdfg_, order_[k], &inputs_[k], &outputs_[k]);
  inst_.assign(static_cast<size_t>(block_count_) * opt_.sub_batches.size(), InstanceState{});
  next_use_cache_.assign(inst_.size(), -1);
  options_cache_.resize(tdfg_.tasks.size());
  may_drop_.assign(block_count_, false);
  // Resident blocks: fixed offsets in the resident region, block order.
  place_resident_blocks(tdfg_, buffers_, resident_buffer_);
  bstate_.resize(buffers_.size());
}

// ---- queries ------------------------------------------------------------------

int64_t IterationSim::next_use_uncached(int32_t inst) const {
  const int32_t r = round_of(inst);
  const std::vector<int32_t>& u = uses_[block_of(inst)];
  if (r > cur_r_) return u.empty() ? kNever : pos(r, u.front());
  if (r < cur_r_) return kNever;
  auto it = std::lower_bound(u.begin(), u.end(), cur_k_);
  return it == u.end() ? kNever : pos(r, *it);
}

int64_t IterationSim::next_use(int32_t inst) const {
  int64_t p = next_use_cache_[inst];
  if (p < here()) {
    p = next_use_uncached(inst);
    next_use_cache_[inst] = p;
  }
  // A dropped block's recomputation reads its chain's inputs where the block is needed next.
  const int32_t r = round_of(inst);
  if (r == cur_r_) {
    for (BlockId y : dependents_[block_of(inst)]) {
      const int32_t yi = instance(r, y);
      if (inst_[yi].dropped) p = std::min(p, next_use_uncached(yi));
    }
  }
  return p;
}

bool IterationSim::recomputable(BlockId b) const {
  const Block& block = tdfg_.blocks[b];
  if (block.kind != BlockKind::output) return false;
  for (TaskId w : block.writers) {
    const Task& wt = tdfg_.tasks[w];
    if (wt.kind != TaskKind::FP || wt.recompute_writes.empty() || (wt.has_algorithms && !algorithms_recomputable()))
      return false;
  }
  for (int32_t p : uses_[b])
    if (tdfg_.tasks[order_[p]].kind != TaskKind::FP) return true;
  return false;
}

bool IterationSim::droppable(int32_t inst) const {
  const InstanceState& s = inst_[inst];
  return round_of(inst) == cur_r_ && may_drop_[block_of(inst)] && s.created && s.buffer != kNoBuffer;
}

double IterationSim::recompute_ms(int32_t inst) {
  double ms = 0;
  const int32_t r = round_of(inst);
  for (TaskId w : tdfg_.blocks[block_of(inst)].writers) ms += rerun_option(w, r, choice_at(w, r)).time_ms;
  return ms;
}

TaskOption IterationSim::rerun_option(TaskId t, int32_t r, int32_t chosen) {
  TaskOption option = options_of(t, r).front();
  if (chosen >= 0) {
    const TaskChoice& c = choices_[static_cast<size_t>(chosen)];
    option = TaskOption{c.algorithm, c.time_ms, c.workspace_bytes};
  }
  option.time_ms = cost_.recompute_ms(tdfg_, t, sub_batch(r), option);
  return option;
}

int32_t& IterationSim::choice_at(TaskId t, int32_t r) {
  const size_t rounds = opt_.sub_batches.size() + 1;  // and the update's kOnceRound
  if (choice_at_.empty()) choice_at_.assign(tdfg_.tasks.size() * rounds, -1);
  return choice_at_[static_cast<size_t>(t) * rounds + static_cast<size_t>(r + 1)];
}

bool IterationSim::algorithms_recomputable() const {
  return opt_.workspace_pool_bytes == 0 && opt_.fixed_configurations.empty() && !opt_.micro_batch_dynamic;
}

bool IterationSim::in_pool(TaskId t, int32_t r) const {
  return opt_.workspace_pool_bytes > 0 && r != kOnceRound &&
         opt_.fixed_configurations.count({t, opt_.sub_batches[r]}) != 0;
}

const std::vector<TaskOption>& IterationSim::options_of(TaskId t, int32_t r) {
  const int64_t b = sub_batch(r);
  auto& cache = options_cache_[t];
  auto it = cache.find(b);
  if (it != cache.end()) return it->second.options;
  if (opt_.micro_batch_dynamic && opt_.fixed_configurations.count({t, b}) == 0 && tdfg_.tasks[t].has_algorithms &&
      b > 1) {
    // mu-cuDNN §III-C1 (planner/sim/dynamic_options.h): the search's shared
    // sets, or this iteration's own.
    TaskOptionSet set = opt_.dynamic_options != nullptr ? opt_.dynamic_options->at(tdfg_, cost_, t, b)
                                                        : dynamic_option_set(tdfg_, cost_, t, b);
    return cache.emplace(b, std::move(set)).first->second.options;
  }
  std::vector<TaskOption> o = cost_.options(tdfg_, t, b);
  MPLAN_CHECK(!o.empty(), "cost model gave no option for " + tdfg_.tasks[t].name);
  std::vector<std::vector<MicroBatch>> micro(o.size());
  auto fixed = opt_.fixed_configurations.find({t, b});
  if (fixed != opt_.fixed_configurations.end() && tdfg_.tasks[t].has_algorithms) {
    // wr / wd: the one configuration chosen beforehand (planner/workspace_mode.h).
    const microbatch::Configuration& c = fixed->second;
    o = {TaskOption{c.micro.front().algorithm, c.time_ms(), c.workspace_bytes()}};
    micro.assign(1, {});
    if (c.micro_batch_count() > 1) {
      for (const microbatch::MicroConfiguration& m : c.micro)
        micro[0].push_back(MicroBatch{m.micro_batch, m.algorithm, m.time_ms, m.workspace_bytes});
    }
  }
  return cache.emplace(b, TaskOptionSet{std::move(o), std::move(micro)}).first->second.options;
}

const std::vector<MicroBatch>& IterationSim::micro_batches_of(TaskId t, int32_t r, size_t option) {
  options_of(t, r);
  return options_cache_[t].at(sub_batch(r)).micro.at(option);
}

double IterationSim::fast_time(int64_t p) {
  const auto r = static_cast<int32_t>(p / n_);
  const auto k = static_cast<int32_t>(p % n_);
  return options_of(order_[k], r).front().time_ms;
}

void IterationSim::infeasible(const std::string& what, int64_t bytes) const {
  throw Infeasible{fmt::format("{} in round {}: no room for {} ({}) in the arena of {} (largest free {})", what,
                               cur_r_, format_bytes(bytes), bytes, format_bytes(opt_.arena_bytes),
                               format_bytes(mm_.largest_free_bytes()))};
}

// ---- primitives -------------------------------------------------------------------

std::optional<Reservation> IterationSim::reserve(const RoomRequest& request) {
  const AllocationId id = next_reservation_++;
  ++generation_;
  std::optional<int64_t> offset = mm_.allocate(id, request.bytes);
  if (!offset) {
    if (mm_.free_bytes() >= mm_.reserved_bytes(request.bytes)) note_fragmented_allocation();
    offset = decider_.make_room(*this, request);
    if (!offset) {
      failed_bytes_ = request.bytes;
      return std::nullopt;
    }
    if (*offset == kBestFit) {
      offset = mm_.allocate(id, request.bytes);
      if (!offset) return std::nullopt;
    } else {
      mm_.allocate_at(id, request.bytes, *offset);
    }
  }
  return Reservation{id, *offset, request.bytes};
}

void IterationSim::cancel(const Reservation& reservation) {
  mm_.free(reservation.id);
  ++generation_;
}

BufferId IterationSim::commit(const Reservation& res, BlockId block, TaskId workspace_of, int32_t r, int32_t inst) {
  const auto id = static_cast<BufferId>(buffers_.size());
  mm_.free(res.id);
  mm_.allocate_at(id, res.bytes, res.offset);
  buffers_.push_back(Buffer{id, block, workspace_of, r, res.bytes, res.offset, false});
  BufferState bs;
  bs.instance = inst;
  // The reuse rule (plan.h): the first writer follows the last users of what was there.
  bs.must_follow = freed_.take(res.offset, res.offset + mm_.reserved_bytes(res.bytes));
  bstate_.push_back(bs);
  timeline_.issue_host(buffer_step(StepKind::alloc, id, r));
  summary_.peak_arena_bytes = std::max(summary_.peak_arena_bytes, res.offset + mm_.reserved_bytes(res.bytes));
  summary_.peak_live_bytes = std::max(summary_.peak_live_bytes, mm_.live_bytes() + pool_live_bytes_);
  return id;
}

void IterationSim::note_pool_use(int64_t bytes, int sign) {
  pool_live_bytes_ += sign * mm_.reserved_bytes(bytes);
  summary_.peak_live_bytes = std::max(summary_.peak_live_bytes, mm_.live_bytes() + pool_live_bytes_);
}

void IterationSim::free_buffer(BufferId buf) {
  const Buffer& b = buffers_[buf];
  // A buffer freed before its first writer passes on what that writer owed.
  freed_.add(b.offset, b.offset + mm_.reserved_bytes(b.bytes), merge_slot_steps(bstate_[buf].users, bstate_[buf].must_follow));
  if (bstate_[buf].in_pool) note_pool_use(b.bytes, -1);
  else mm_.free(buf);
  timeline_.issue_host(buffer_step(StepKind::free, buf, b.round));
}

void IterationSim::touch(int32_t inst) {
  ++generation_;
  InstanceState& s = inst_[inst];
  if (s.buffer != kNoBuffer) lru_.erase({s.stamp, inst});
  s.stamp = ++clock_;
  if (s.buffer != kNoBuffer) lru_.insert({s.stamp, inst});
}

void IterationSim::release(int32_t inst) {
  InstanceState& s = inst_[inst];
  if (s.buffer == kNoBuffer) return;
  lru_.erase({s.stamp, inst});
  free_buffer(s.buffer);
  s.buffer = kNoBuffer;
}

void IterationSim::offload(int32_t inst) {
  InstanceState& s = inst_[inst];
  MPLAN_CHECK(s.buffer != kNoBuffer && s.created, "offloading a block that is not on the device");
  if (round_of(inst) == 0) offloaded_.insert(block_of(inst));
  if (s.host_valid) return;
  const BufferId buf = s.buffer;
  const int32_t r = round_of(inst);
  if (s.host_slot == kNoHostSlot) s.host_slot = add_host_slot(host_slots_, host_bytes_, block_of(inst), r, buffers_[buf].bytes);
  const int slot = timeline_.d2h_slot();
  const int32_t step = timeline_.issue(buffer_step(StepKind::offload, buf, r, s.host_slot), slot,
                                       cost_.device_to_host_ms(buffers_[buf].bytes),
                                       offload_predecessors(timeline_, bstate_[buf]));
  record_offload(bstate_[buf], slot, step, buffers_[buf].bytes, summary_);
  last_copy_[slot] = step;
  s.host_writer = step;
  s.host_valid = true;
}

double IterationSim::move_ms(int64_t bytes) {
  if (streaming_ms_per_byte_ < 0)
    streaming_ms_per_byte_ = streaming_ms_per_byte(cost_, tdfg_, opt_.sub_batches.front());
  return 2.0 * static_cast<double>(bytes) * streaming_ms_per_byte_;
}

void IterationSim::move(int32_t inst, int64_t offset) {
  InstanceState& s = inst_[inst];
  MPLAN_CHECK(s.buffer != kNoBuffer && s.created, "moving a block that is not on the device");
  const BufferId from = s.buffer;
  const Buffer old = buffers_[from];
  const AllocationId id = next_reservation_++;
  mm_.allocate_at(id, old.bytes, offset);
  const BufferId to = commit(Reservation{id, offset, old.bytes}, old.block, kNoTask, old.round, inst);
  Step st = buffer_step(StepKind::move, to, old.round);
  st.reads = {from};
  st.writes = {to};
  const SlotSteps after = compute_predecessors(timeline_, st, bstate_);
  const int32_t step = timeline_.issue(std::move(st), kComputeSlot, move_ms(old.bytes), after);
  record_compute(timeline_.step(step), step, bstate_);
  s.buffer = to;
  free_buffer(from);
  ++generation_;
  summary_.move_count++;
  summary_.bytes_moved += old.bytes;
}

void IterationSim::evict(int32_t inst) {
  InstanceState& s = inst_[inst];
  MPLAN_CHECK(s.buffer != kNoBuffer, "evicting a block that is not on the device");
  if (s.created && !s.host_valid) offload(inst);
  release(inst);
}

void IterationSim::drop(int32_t inst) {
  MPLAN_CHECK(may_drop_[block_of(inst)] && round_of(inst) == cur_r_, "dropping a block that cannot be recomputed");
  release(inst);
  inst_[inst].dropped = true;
}

bool IterationSim::load(int32_t inst, const RoomRequest& request) {
  InstanceState& s = inst_[inst];
  const BlockId block = block_of(inst);
  const int32_t r = round_of(inst);
  MPLAN_CHECK(s.buffer == kNoBuffer, "loading a block that is on the device");
  MPLAN_CHECK(s.host_valid || (host_sourced(block) && !s.created),
              "block " + tdfg_.blocks[block].name + " has no host copy to load");
  const int64_t bytes = instance_bytes(inst);
  RoomRequest req = request;
  req.bytes = bytes;
  std::optional<Reservation> res = reserve(req);
  if (!res) return false;
  const BufferId buf = commit(*res, block, kNoTask, r, inst);
  if (s.host_slot == kNoHostSlot) s.host_slot = add_host_slot(host_slots_, host_bytes_, block, r, bytes);
  const int slot = timeline_.h2d_slot();
  // After the users of the range and after the offload that filled the host copy.
  const int32_t step = timeline_.issue(buffer_step(StepKind::prefetch, buf, r, s.host_slot), slot,
                                       cost_.host_to_device_ms(bytes),
                                       prefetch_predecessors(timeline_, bstate_[buf], s.host_writer));
  record_prefetch(bstate_[buf], slot, step);
  last_copy_[slot] = step;
  s.buffer = buf;
  s.used_since_arrival = false;
  s.created = true;
  s.host_valid = true;  // the content came from the host
  touch(inst);
  if (host_sourced(block) && !s.loaded_once) {
    summary_.input_load_count++;
    summary_.input_bytes += bytes;
  } else {
    summary_.prefetch_count++;
    summary_.bytes_to_device += bytes;
  }
  s.loaded_once = true;
  return true;
}

bool IterationSim::ensure(int32_t inst) {
  InstanceState& s = inst_[inst];
  if (s.buffer != kNoBuffer) {
    touch(inst);
    return true;
  }
  if (s.dropped) return recompute(inst);
  return load(inst, RoomRequest{instance_bytes(inst), timeline_.h2d_slot(), here(), RoomRequest::Purpose::input});
}

void IterationSim::missing_inputs(int32_t inst, std::vector<int32_t>* out) const {
  const InstanceState& s = inst_[inst];
  if (s.buffer != kNoBuffer || std::find(out->begin(), out->end(), inst) != out->end()) return;
  if (!s.dropped) {
    if (s.host_valid || (host_sourced(block_of(inst)) && !s.created)) out->push_back(inst);
    return;
  }
  const int32_t r = round_of(inst);
  for (TaskId w : tdfg_.blocks[block_of(inst)].writers)
    for (BlockId x : tdfg_.tasks[w].recompute_reads)
      if (!tdfg_.blocks[x].resident && x != block_of(inst)) missing_inputs(instance(r, x), out);
}

// SuperNeurons §3.4: re-run the FP tasks that write the block (a chain, for
// a block shared by in-place layers), after making their inputs present.
bool IterationSim::recompute(int32_t inst) {
  const BlockId b = block_of(inst);
  const int32_t r = round_of(inst);
  locked_.insert(inst);
  const std::vector<TaskId>& writers = tdfg_.blocks[b].writers;
  for (TaskId w : writers) {
    for (BlockId x : tdfg_.tasks[w].recompute_reads) {
      if (tdfg_.blocks[x].resident || x == b) continue;
      const int32_t xi = instance(r, x);
      locked_.insert(xi);
      if (!ensure(xi)) return false;
    }
  }
  // Blocks the recomputation writes besides b (dropout's mask): rewritten in
  // place, or made anew (and freed right after if no later task needs them).
  std::vector<int32_t> scratch;
  for (TaskId w : writers) {
    for (BlockId x : tdfg_.tasks[w].recompute_writes) {
      if (x == b) continue;
      const int32_t xi = instance(r, x);
      locked_.insert(xi);
      if (inst_[xi].buffer != kNoBuffer) continue;
      if (last_use_[x] < cur_k_) scratch.push_back(xi);
      std::optional<Reservation> res =
          reserve(RoomRequest{instance_bytes(xi), kComputeSlot, here(), RoomRequest::Purpose::recompute});
      if (!res) return false;
      inst_[xi].buffer = commit(*res, x, kNoTask, r, xi);
      inst_[xi].dropped = false;
      touch(xi);
    }
  }
  std::optional<Reservation> res =
      reserve(RoomRequest{instance_bytes(inst), kComputeSlot, here(), RoomRequest::Purpose::recompute});
  if (!res) return false;
  // Each writer reruns the option of its first run in the round (a
  // convolution its algorithm), with a workspace of that size: the same
  // kernel on the same inputs, so the same values (docs/plan-format.md,
  // "Recomputation").
  std::vector<TaskOption> rerun;
  std::vector<std::optional<Reservation>> workspaces;
  for (TaskId w : writers) {
    rerun.push_back(rerun_option(w, r, choice_at(w, r)));
    workspaces.emplace_back();
    if (rerun.back().workspace_bytes == 0) continue;
    workspaces.back() =
        reserve(RoomRequest{rerun.back().workspace_bytes, kComputeSlot, here(), RoomRequest::Purpose::workspace});
    if (!workspaces.back()) {
      for (const std::optional<Reservation>& w2 : workspaces)
        if (w2) cancel(*w2);
      cancel(*res);
      return false;
    }
  }
  InstanceState& s = inst_[inst];
  s.buffer = commit(*res, b, kNoTask, r, inst);
  touch(inst);
  for (size_t i = 0; i < writers.size(); ++i) {
    const TaskId w = writers[i];
    const BufferId workspace = workspaces[i] ? commit(*workspaces[i], kNoBlock, w, r, -1) : kNoBuffer;
    const int32_t step = compute_step(w, r, rerun[i], workspace, /*recompute=*/true, kNoSlotSteps);
    if (workspace != kNoBuffer) free_buffer(workspace);
    recompute_steps_.push_back(step);
    for (BlockId x : tdfg_.tasks[w].recompute_writes) {
      InstanceState& xs = inst_[instance(r, x)];
      xs.created = true;
      xs.host_valid = false;
      xs.dropped = false;
    }
  }
  for (int32_t xi : scratch) release(xi);
  return true;
}

int32_t IterationSim::compute_step(TaskId t, int32_t r, const TaskOption& option, BufferId workspace, bool recompute,
                                   SlotSteps after) {
  const Task& task = tdfg_.tasks[t];
  Step st;
  st.kind = StepKind::compute;
  st.task = t;
  st.round = r;
  st.recompute = recompute;
  auto buffer_of = [&](BlockId b) {
    return tdfg_.blocks[b].resident ? resident_buffer_[b] : inst_[instance(r, b)].buffer;
  };
  for (BlockId b : recompute ? task.recompute_reads : task.reads) {
    const BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "input " + tdfg_.blocks[b].name + " of " + task.name + " not on the device");
    st.reads.push_back(buf);
  }
  for (BlockId b : recompute ? task.recompute_writes : task.writes) {
    const BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "output " + tdfg_.blocks[b].name + " of " + task.name + " not on the device");
    st.writes.push_back(buf);
  }
  st.workspace = workspace;
  after = compute_predecessors(timeline_, st, bstate_, after);
  const int32_t step = timeline_.issue(std::move(st), kComputeSlot, option.time_ms, after);
  record_compute(timeline_.step(step), step, bstate_);
  return step;
}

// ---- the run --------------------------------------------------------------------

// Per round: which blocks may be dropped (asked once), and the last position
// each block is needed at, extended so that a droppable block's
// recomputation finds its inputs (on the device or the host).
void IterationSim::start_round(int32_t r) {
  cur_r_ = r;
  cur_k_ = 0;
  decider_.start_round(*this, r);
  may_drop_.assign(block_count_, false);
  last_use_.assign(block_count_, -1);
  for (BlockId b = 0; b < block_count_; ++b)
    if (!uses_[b].empty()) last_use_[b] = uses_[b].back();
  for (int32_t k = 0; k < n_; ++k)
    for (BlockId y : outputs_[k])
      if (recomputable(y)) may_drop_[y] = decider_.may_drop(*this, y);
  dependents_.assign(block_count_, {});
  for (int32_t k = n_ - 1; k >= 0; --k) {
    for (BlockId y : outputs_[k]) {
      if (!may_drop_[y]) continue;
      for (TaskId w : tdfg_.blocks[y].writers)
        for (BlockId x : tdfg_.tasks[w].recompute_reads) {
          if (tdfg_.blocks[x].resident || x == y) continue;
          last_use_[x] = std::max(last_use_[x], last_use_[y]);
          if (!contains(dependents_[x], y)) dependents_[x].push_back(y);
        }
    }
  }
  frees_at_.assign(n_, {});
  for (BlockId b = 0; b < block_count_; ++b)
    if (last_use_[b] >= 0 && !tdfg_.blocks[b].resident) frees_at_[last_use_[b]].push_back(b);
}

// Algorithm 1 lines 3-14: the inputs present (loaded or recomputed), the
// outputs and the workspace reserved. False (reservations cancelled) when
// something does not fit.
bool IterationSim::try_task(int32_t r, int32_t k, size_t* option, std::optional<Reservation>* workspace) {
  const TaskId t = order_[k];
  locked_.clear();
  for (BlockId b : inputs_[k]) locked_.insert(instance(r, b));
  for (BlockId b : outputs_[k]) locked_.insert(instance(r, b));
  pending_.clear();
  auto fail = [&] {
    for (const Reservation& res : pending_) cancel(res);
    pending_.clear();
    workspace->reset();
    return false;
  };
  for (BlockId b : inputs_[k]) {
    if (!ensure(instance(r, b))) return fail();
  }
  for (BlockId b : outputs_[k]) {
    const int32_t i = instance(r, b);
    MPLAN_CHECK(inst_[i].buffer == kNoBuffer, "an output is on the device before its task");
    std::optional<Reservation> res = reserve(RoomRequest{instance_bytes(i), kComputeSlot, here(), RoomRequest::Purpose::output});
    if (!res) return fail();
    pending_.push_back(*res);
  }
  const std::vector<TaskOption>& opts = options_of(t, r);
  *option = decider_.choose_option(*this, r, k, opts);
  if (*option >= opts.size()) return fail();
  const TaskOption& o = opts[*option];
  if (o.workspace_bytes > 0 && !in_pool(t, r)) {
    *workspace = reserve(RoomRequest{o.workspace_bytes, kComputeSlot, here(), RoomRequest::Purpose::workspace});
    if (!*workspace) return fail();
  }
  return true;
}

// Evicts every block on the device (moDNN §IV-B.1: "offloading all data and
// then reloading required data"); a droppable one is dropped where its
// recomputation costs no more than its round trip over the link (always for
// the cheap layers; a convolution only where the link is the slower way).
// keep_inputs_of >= 0: but the current round's inputs of the task at that
// position (Decider::defragment_around_task).
void IterationSim::defragment(int32_t keep_inputs_of) {
  std::vector<int32_t> live;
  for (const auto& [stamp, inst] : lru_)
    if (keep_inputs_of < 0 || round_of(inst) != cur_r_ || !contains(inputs_[keep_inputs_of], block_of(inst)))
      live.push_back(inst);
  for (int32_t i : live) {
    const bool drop_it = droppable(i) && !inst_[i].host_valid &&
                         recompute_ms(i) <= cost_.device_to_host_ms(instance_bytes(i)) +
                                                cost_.host_to_device_ms(instance_bytes(i));
    if (drop_it) drop(i);
    else evict(i);
  }
  summary_.defragmentation_count++;
}

void IterationSim::issue_task(int32_t r, int32_t k, size_t option, const std::optional<Reservation>& workspace) {
  const TaskId t = order_[k];
  const Task& task = tdfg_.tasks[t];
  const TaskOption o = options_of(t, r)[option];
  for (size_t i = 0; i < outputs_[k].size(); ++i) {
    const int32_t inst = instance(r, outputs_[k][i]);
    inst_[inst].buffer = commit(pending_[i], outputs_[k][i], kNoTask, r, inst);
  }
  pending_.clear();
  TaskChoice choice;
  choice.task = t;
  choice.round = r;
  choice.sub_batch = sub_batch(r);
  choice.algorithm = o.algorithm;
  choice.time_ms = o.time_ms;
  choice.workspace_bytes = o.workspace_bytes;
  choice.gain_ms = decider_.last_gain_ms();
  choice.micro_batches = micro_batches_of(t, r, option);
  slower_options_ms_ += o.time_ms - options_of(t, r).front().time_ms;
  if (o.workspace_bytes > 0 && in_pool(t, r)) {
    MPLAN_CHECK(mm_.reserved_bytes(o.workspace_bytes) <= opt_.arena_bytes - pool_offset_,
                "task " + task.name + "'s workspace exceeds the wd pool");
    const auto id = static_cast<BufferId>(buffers_.size());
    buffers_.push_back(Buffer{id, kNoBlock, t, r, o.workspace_bytes, pool_offset_, false});
    BufferState bs;
    bs.in_pool = true;
    bs.must_follow = freed_.take(pool_offset_, pool_offset_ + mm_.reserved_bytes(o.workspace_bytes));
    bstate_.push_back(bs);
    timeline_.issue_host(buffer_step(StepKind::alloc, id, r));
    note_pool_use(o.workspace_bytes, +1);
    pool_peak_end_ = std::max(pool_peak_end_, pool_offset_ + mm_.reserved_bytes(o.workspace_bytes));
    choice.workspace = id;
    choice.workspace_offset = pool_offset_;
  } else if (workspace) {
    choice.workspace = commit(*workspace, kNoBlock, t, r, -1);
    choice.workspace_offset = workspace->offset;
  }
  compute_step(t, r, o, choice.workspace, /*recompute=*/false, extra_after_);
  for (BlockId b : task.reads) {
    if (tdfg_.blocks[b].resident) continue;
    InstanceState& s = inst_[instance(r, b)];
    s.used_since_arrival = true;
    touch(instance(r, b));
  }
  for (BlockId b : inputs_[k]) {
    if (contains(task.writes, b)) inst_[instance(r, b)].host_valid = false;
  }
  for (BlockId b : outputs_[k]) {
    InstanceState& s = inst_[instance(r, b)];
    s.created = true;
    s.host_valid = false;
    s.used_since_arrival = false;
    touch(instance(r, b));
  }
  choice_at(t, r) = static_cast<int32_t>(choices_.size());
  choices_.push_back(std::move(choice));
  if (choices_.back().workspace != kNoBuffer) free_buffer(choices_.back().workspace);
}

void IterationSim::run_task(int32_t r, int32_t k) {
  cur_r_ = r;
  cur_k_ = k;
  extra_after_ = kNoSlotSteps;
  decider_.before_task(*this, r, k);
  size_t option = 0;
  std::optional<Reservation> workspace;
  bool ok = try_task(r, k, &option, &workspace);
  if (!ok && decider_.defragment_on_failure() && decider_.defragment_around_task()) {
    locked_.clear();
    defragment(k);
    ok = try_task(r, k, &option, &workspace);
  }
  if (!ok && decider_.defragment_on_failure()) {
    locked_.clear();
    defragment(-1);
    ok = try_task(r, k, &option, &workspace);
  }
  const Task& task = tdfg_.tasks[order_[k]];
  if (!ok) infeasible("task " + task.name, failed_bytes_);
  decider_.before_issue(*this, r, k, options_of(order_[k], r)[option].time_ms);
  issue_task(r, k, option, workspace);
  decider_.after_task(*this, r, k);
  // Algorithm 1 lines 29-31: free what no later task of the round needs.
  for (BlockId b : frees_at_[k]) {
    const int32_t i = instance(r, b);
    release(i);
    inst_[i].dropped = false;
  }
  locked_.clear();
}

void IterationSim::run_update() {
  cur_r_ = rounds();
  cur_k_ = 0;
  const TaskOption& o = options_of(tdfg_.update_task, kOnceRound).front();
  choices_.push_back(issue_update(tdfg_, o, resident_buffer_, timeline_, bstate_));
}

PlanResult IterationSim::run() {
  PlanResult result;
  try {
    decider_.start(*this);
    for (int32_t r = 0; r < rounds(); ++r) {
      start_round(r);
      for (int32_t k = 0; k < n_; ++k) {
        run_task(r, k);
        if (opt_.abandon_after_ms > 0 && timeline_.free_at_ms(kComputeSlot) > opt_.abandon_after_ms) {
          result.abandoned = true;
          result.note = "abandoned: slower than the best plan so far";
          return result;
        }
      }
    }
  } catch (const Infeasible& e) {
    result.note = e.message;
    return result;
  }
  for (const InstanceState& s : inst_) MPLAN_CHECK(s.buffer == kNoBuffer, "a block outlives its round");
  if (tdfg_.update_task != kNoTask) run_update();

  PlanSummary summary = summary_;
  int64_t resident_region = 0;
  for (const Buffer& b : buffers_)
    if (b.resident) resident_region = std::max(resident_region, b.offset + align_up(std::max<int64_t>(1, b.bytes)));
  result.plan = finish_plan(SimulatedParts{opt_.arena_bytes, resident_region, host_bytes_, opt_.sub_batches,
                                           opt_.copy_engines, std::move(choices_), std::move(buffers_),
                                           std::move(host_slots_), summary},
                            timeline_, mm_);
  // Figures of what the plan touches (cancelled reservations excluded; the wd pool's workspaces included).
  result.plan.summary.peak_arena_bytes = std::max(summary.peak_arena_bytes, pool_peak_end_);
  result.plan.summary.peak_live_bytes = summary.peak_live_bytes;
  result.plan.summary.fragmentation =
      summary.peak_live_bytes > 0
          ? static_cast<double>(result.plan.summary.peak_arena_bytes) / static_cast<double>(summary.peak_live_bytes) - 1
          : 0.0;
  result.feasible = true;
  // A block prefetched and then evicted unread (a defragmentation) cost its
  // copy for nothing: removed from the plan (planner/prefetch_pruning.h).
  const PrunedPrefetches pruned = remove_unread_prefetches(result.plan, tdfg_);
  if (pruned.removed > 0) {
    std::vector<int32_t> kept;
    for (int32_t step : recompute_steps_)
      if (const int32_t at = pruned.new_step_index[static_cast<size_t>(step)]; at >= 0) kept.push_back(at);
    recompute_steps_ = std::move(kept);
  }
  result.recompute_steps = std::move(recompute_steps_);
  result.recomputed_tasks = static_cast<int32_t>(result.recompute_steps.size());
  result.offloaded_blocks.assign(offloaded_.begin(), offloaded_.end());
  result.slower_options_ms = slower_options_ms_;
  result.fragmented_allocations = fragmented_allocations_;
  return result;
}

PlanResult simulate_iteration(const Tdfg& tdfg, const CostModel& cost, const SimOptions& options, Decider& decider) {
  return IterationSim(tdfg, cost, options, decider).run();
}

}  // namespace mplan
