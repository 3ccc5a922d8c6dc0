#include "planner/scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "planner/memory_manager.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"
#include "planner/plan_builder.h"
#include "planner/streams.h"

namespace mplan {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
const std::map<int64_t, Segment> kNoSegments;

// A non-resident block in one round: where it is now.
struct InstanceState {
  BufferId buffer = kNoBuffer;        // its device buffer, if on the device
  HostSlotId host_slot = kNoHostSlot;
  bool host_valid = false;            // the host holds its current content
  bool created = false;               // written by a task (or host data)
  // moDNN §IV-B.1 criterion (b): used since it was made or prefetched.
  bool used_since_arrival = false;
  bool loaded_once = false;           // host data loaded at least once (input loads)
  int32_t host_writer = -1;           // the offload that wrote the host copy
};

struct BufferState : BufferDeps {
  int32_t instance = -1;              // -1: a workspace or a resident block
  bool in_pool = false;               // a workspace in the wd pool (not in the memory manager)
};

// An offloading scheme (§IV-B.1, Fig. 4): contiguous segments from `begin`.
struct Scheme {
  bool found = false;
  int64_t begin = 0;
  std::vector<BufferId> victims;
  double delay_ms = 0;
  double transfer_ms = 0;
  int64_t soonest_next_use = 0;
};

// The distinct non-resident blocks a task reads (inputs, accumulated outputs
// included) and the ones it creates.
struct TaskBlocks {
  std::vector<BlockId> inputs, outputs;
};
TaskBlocks task_blocks(const Tdfg& tdfg, TaskId t) {
  const Task& task = tdfg.tasks[t];
  TaskBlocks tb;
  for (BlockId b : task.reads) {
    if (!tdfg.blocks[b].resident && std::find(tb.inputs.begin(), tb.inputs.end(), b) == tb.inputs.end())
      tb.inputs.push_back(b);
  }
  for (BlockId b : task.writes) {
    const Block& block = tdfg.blocks[b];
    if (block.resident || std::find(tb.inputs.begin(), tb.inputs.end(), b) != tb.inputs.end() ||
        std::find(tb.outputs.begin(), tb.outputs.end(), b) != tb.outputs.end())
      continue;
    // A later writer of an accumulated block reads it too.
    if (!block.writers.empty() && block.writers.front() != t) tb.inputs.push_back(b);
    else tb.outputs.push_back(b);
  }
  return tb;
}

// One segment of the arena as find_scheme sees it: whether a scheme may
// take it, and what taking it costs (Fig. 3).
struct ScanSegment {
  int64_t begin = 0, end = 0;
  BufferId owner = kNoBuffer;      // kNoBuffer: free
  bool acceptable = false;         // free, or offloadable now
  double users_end_ms = 0;         // the last of its users' ends
  double writer_end_ms = 0;        // its last writer's end (0: none)
  double copy_ms = 0;              // its d2h copy, 0 when the host has it
  bool needs_copy = false;
  int64_t next_use = 0;
};

class Scheduler {
 public:
  Scheduler(const Tdfg& tdfg, const CostModel& cost, const ScheduleOptions& options)
      : tdfg_(tdfg), cost_(cost), opt_(options),
        pool_offset_(options.arena_bytes - (options.workspace_pool_bytes > 0 ? align_up(options.workspace_pool_bytes) : 0)),
        mm_(pool_offset_, kPlanAlignmentBytes), timeline_(options.copy_engines) {
    MPLAN_CHECK(pool_offset_ > 0, "the workspace pool leaves no arena");
    if (options.large_block_divisor > 0) mm_.place_large_at_top(pool_offset_ / options.large_block_divisor);
  }

  std::optional<Plan> run();

 private:
  // Positions of the unrolled sequence: round r, task k of the round's list.
  int64_t pos(int32_t r, int32_t k) const { return static_cast<int64_t>(r) * n_ + k; }
  int32_t inst_index(int32_t r, BlockId b) const { return r * static_cast<int32_t>(tdfg_.blocks.size()) + b; }
  int64_t instance_bytes(int32_t inst) const;
  bool host_sourced(BlockId b) const { return tdfg_.blocks[b].writers.empty(); }
  int64_t next_use(int32_t inst) const;
  int64_t next_use_uncached(int32_t inst) const;
  bool evictable(BufferId buf, int64_t horizon) const;
  const std::vector<TaskOption>& options_of(TaskId t, int32_t r);
  double fast_time(int64_t p);

  std::optional<int64_t> obtain(int64_t bytes, int writer_slot, int64_t horizon);
  Scheme find_scheme(int64_t bytes, int writer_slot, int64_t horizon) const;
  void evict(int32_t inst);
  void free_buffer(BufferId buf);
  BufferId new_buffer(BlockId block, TaskId workspace_of, int32_t r, int64_t bytes, int64_t offset,
                      int32_t inst);
  void load(int32_t inst, int64_t offset);
  bool prepare(int32_t r, int32_t k);
  bool choose_option(int32_t r, int32_t k, TaskChoice* choice);
  // wd: task t's workspace in round r goes into the pool.
  bool in_pool(TaskId t, int32_t r) const {
    return opt_.workspace_pool_bytes > 0 && r != kOnceRound &&
           opt_.fixed_configurations.count({t, opt_.sub_batches[r]}) != 0;
  }
  void prefetch_ahead(int32_t r, int32_t k, double task_ms);
  void defragment();
  void run_task(int32_t r, int32_t k);
  void run_update();

  const Tdfg& tdfg_;
  const CostModel& cost_;
  const ScheduleOptions& opt_;
  int64_t pool_offset_ = 0;                    // start of the wd pool; arena_bytes when none
  int64_t pool_peak_end_ = 0;                  // highest end of a pool workspace
  MemoryManager mm_;
  StreamTimeline timeline_;

  std::vector<TaskId> order_;                  // the round's tasks (all but the update)
  int32_t n_ = 0;
  std::vector<std::vector<int32_t>> uses_;     // per block: positions k in a round that use it
  std::vector<TaskBlocks> blocks_of_;          // per position k: task_blocks of order_[k]
  // Per instance: a position >= the current one and the instance's first use
  // at or after the position it was computed at (valid while it is >= the
  // current position: no use lies in between).
  mutable std::vector<int64_t> next_use_cache_;
  mutable std::vector<ScanSegment> scan_;      // find_scheme's scratch
  // What scan_ was made for: every arena change issues an alloc or free step,
  // so the step count dates it.
  mutable size_t scan_steps_ = SIZE_MAX;
  mutable int64_t scan_horizon_ = -1, scan_pos_ = -1;
  std::vector<InstanceState> inst_;
  std::vector<Buffer> buffers_;
  std::vector<BufferState> bstate_;
  std::vector<BufferId> resident_buffer_;      // per block, kNoBuffer if not resident
  std::vector<HostSlot> host_slots_;
  int64_t host_bytes_ = 0;
  FreedRanges freed_;                          // the reuse rule (plan.h)
  std::map<std::pair<TaskId, int64_t>, std::vector<TaskOption>> options_cache_;
  // Per option of options_cache_: its micro-batches (empty: undivided).
  std::map<std::pair<TaskId, int64_t>, std::vector<std::vector<MicroBatch>>> micro_cache_;
  std::map<std::pair<int32_t, int64_t>, double> fast_time_cache_;
  std::vector<TaskChoice> choices_;
  int32_t cur_r_ = 0, cur_k_ = 0;
  PlanSummary summary_;
};

int64_t Scheduler::instance_bytes(int32_t inst) const {
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  return tdfg_.blocks[inst % nb].bytes(opt_.sub_batches[inst / nb]);
}

// The next position that uses the instance, from the current task on.
int64_t Scheduler::next_use(int32_t inst) const {
  int64_t here = pos(cur_r_, cur_k_);
  if (next_use_cache_[inst] >= here) return next_use_cache_[inst];
  int64_t p = next_use_uncached(inst);
  next_use_cache_[inst] = p;
  return p;
}

int64_t Scheduler::next_use_uncached(int32_t inst) const {
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  int32_t r = inst / nb;
  const std::vector<int32_t>& u = uses_[inst % nb];
  if (r > cur_r_) return u.empty() ? kNever : pos(r, u.front());
  if (r < cur_r_) return kNever;
  auto it = std::lower_bound(u.begin(), u.end(), cur_k_);
  return it == u.end() ? kNever : pos(r, *it);
}

// §IV-B.1: a block may be offloaded unless the task being prepared (or, for
// a prefetch, any task up to the one prefetched for) uses it -- criterion (a)
// -- or it has not been used since it was made or prefetched -- criterion (b).
bool Scheduler::evictable(BufferId buf, int64_t horizon) const {
  int32_t inst = bstate_[buf].instance;
  if (inst < 0) return false;
  const InstanceState& s = inst_[inst];
  return s.created && s.used_since_arrival && next_use(inst) > horizon;
}

const std::vector<TaskOption>& Scheduler::options_of(TaskId t, int32_t r) {
  int64_t b = r == kOnceRound ? 1 : opt_.sub_batches[r];
  auto key = std::make_pair(t, b);
  auto it = options_cache_.find(key);
  if (it != options_cache_.end()) return it->second;
  std::vector<TaskOption> o = cost_.options(tdfg_, t, b);
  MPLAN_CHECK(!o.empty(), "cost model gave no option for " + tdfg_.tasks[t].name);
  std::vector<std::vector<MicroBatch>> micro(o.size());
  auto fixed = opt_.fixed_configurations.find(key);
  if (fixed != opt_.fixed_configurations.end() && tdfg_.tasks[t].has_algorithms) {
    // wr / wd: the one configuration chosen beforehand (planner/workspace_mode.h).
    const microbatch::Configuration& c = fixed->second;
    o = {TaskOption{c.micro.front().algorithm, c.time_ms(), c.workspace_bytes()}};
    micro.assign(1, {});
    if (c.micro_batch_count() > 1) {
      for (const microbatch::MicroConfiguration& m : c.micro) {
        micro[0].push_back(MicroBatch{m.micro_batch, m.algorithm, m.time_ms, m.workspace_bytes});
      }
    }
  } else if (opt_.micro_batch_dynamic && tdfg_.tasks[t].has_algorithms && b > 1) {
    // mu-cuDNN §III-C1: the desirable set (Pareto front in time and
    // workspace) of the task's configurations; the undivided ones stay.
    using namespace microbatch;
    BenchmarkTable table =
        table_from_cost_model(cost_, tdfg_, t, micro_batch_sizes(BatchSizePolicy::power_of_two, b));
    for (const Configuration& c : desirable_configurations(table, b, BatchSizePolicy::power_of_two)) {
      if (c.micro_batch_count() < 2) continue;
      o.push_back(TaskOption{c.micro.front().algorithm, c.time_ms(), c.workspace_bytes()});
      std::vector<MicroBatch> list;
      for (const MicroConfiguration& m : c.micro) {
        list.push_back(MicroBatch{m.micro_batch, m.algorithm, m.time_ms, m.workspace_bytes});
      }
      micro.push_back(std::move(list));
    }
    // Fastest first (fast_time reads the front), ties: less workspace, undivided first.
    std::vector<size_t> idx(o.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t c) {
      return std::make_tuple(o[a].time_ms, o[a].workspace_bytes) < std::make_tuple(o[c].time_ms, o[c].workspace_bytes);
    });
    std::vector<TaskOption> so;
    std::vector<std::vector<MicroBatch>> sm;
    for (size_t i : idx) {
      so.push_back(o[i]);
      sm.push_back(micro[i]);
    }
    o = std::move(so);
    micro = std::move(sm);
  }
  micro_cache_.emplace(key, std::move(micro));
  return options_cache_.emplace(key, std::move(o)).first->second;
}

// The fastest option's time of the task at position p (estimates of EST).
double Scheduler::fast_time(int64_t p) {
  auto r = static_cast<int32_t>(p / n_);
  auto k = static_cast<int32_t>(p % n_);
  auto key = std::make_pair(k, opt_.sub_batches[r]);
  auto it = fast_time_cache_.find(key);
  if (it != fast_time_cache_.end()) return it->second;
  double ms = options_of(order_[k], r).front().time_ms;
  fast_time_cache_[key] = ms;
  return ms;
}

// The offloading scheme of least delay (§IV-B.1, Fig. 3-4): every run of
// contiguous free or offloadable segments, started at each node of the list
// and extended until it holds `bytes`. Ties: least transfer, then the blocks
// needed latest, then the lowest address. One walk of the list gathers what
// each segment costs; the windows then slide over that array (their ends only
// move forward as their starts do), so a call is linear in the segments plus
// the windows' lengths.
Scheme Scheduler::find_scheme(int64_t bytes, int writer_slot, int64_t horizon) const {
  int64_t need = mm_.reserved_bytes(bytes);
  double writer_ready_ms = timeline_.free_at_ms(writer_slot);
  double d2h_free_ms = timeline_.free_at_ms(timeline_.d2h_slot());
  std::vector<ScanSegment>& segs = scan_;
  // The scan depends on the arena, the timeline and the horizon only: calls
  // with none of them changed in between (one per option in choose_option)
  // share it.
  bool fresh = scan_steps_ != timeline_.steps().size() || scan_horizon_ != horizon || scan_pos_ != pos(cur_r_, cur_k_);
  if (fresh) segs.clear();
  for (const auto& [begin, seg] : fresh ? mm_.by_address() : kNoSegments) {
    ScanSegment g;
    g.begin = seg.begin;
    g.end = seg.end;
    if (seg.free()) {
      g.acceptable = true;
    } else if (evictable(seg.owner, horizon)) {
      g.acceptable = true;
      g.owner = seg.owner;
      const BufferState& bs = bstate_[seg.owner];
      g.next_use = next_use(bs.instance);
      g.users_end_ms = -std::numeric_limits<double>::infinity();
      for (int32_t u : bs.users) {
        if (u >= 0) g.users_end_ms = std::max(g.users_end_ms, timeline_.step(u).end_ms);
      }
      if (!inst_[bs.instance].host_valid) {
        g.needs_copy = true;
        g.writer_end_ms = bs.last_writer >= 0 ? timeline_.step(bs.last_writer).end_ms : 0.0;
        g.copy_ms = cost_.device_to_host_ms(buffers_[seg.owner].bytes);
      }
    }
    segs.push_back(g);
  }
  scan_steps_ = timeline_.steps().size();
  scan_horizon_ = horizon;
  scan_pos_ = pos(cur_r_, cur_k_);
  // Fig. 3: offloads queue on the d2h stream; the writer waits for them and
  // for the last users of the freed blocks.
  Scheme best;
  size_t best_i = 0, best_j = 0;
  auto better = [](const Scheme& a, const Scheme& b) {
    return std::make_tuple(a.delay_ms, a.transfer_ms, -a.soonest_next_use, a.begin) <
           std::make_tuple(b.delay_ms, b.transfer_ms, -b.soonest_next_use, b.begin);
  };
  size_t n = segs.size();
  size_t j = 0;  // the window [i, j): first segment past it
  for (size_t i = 0; i < n; ++i) {
    if (!segs[i].acceptable) continue;
    int64_t begin = segs[i].begin;
    j = std::max(j, i);
    while (j < n && segs[j].acceptable && segs[j].begin - begin < need) ++j;
    int64_t span_end = j == i ? begin : segs[j - 1].end;
    if (span_end - begin < need) {
      if (j == n) break;
      i = j;  // blocked: no window can cross j
      continue;
    }
    Scheme c;
    c.found = true;
    c.begin = begin;
    c.soonest_next_use = kNever;
    double copy_free_ms = d2h_free_ms;
    double ready_ms = writer_ready_ms;
    for (size_t k = i; k < j; ++k) {
      const ScanSegment& g = segs[k];
      if (g.owner == kNoBuffer) continue;
      c.soonest_next_use = std::min(c.soonest_next_use, g.next_use);
      ready_ms = std::max(ready_ms, g.users_end_ms);
      if (g.needs_copy) {
        double start = std::max(copy_free_ms, g.writer_end_ms);
        copy_free_ms = start + g.copy_ms;
        c.transfer_ms += g.copy_ms;
        ready_ms = std::max(ready_ms, copy_free_ms);
      }
    }
    c.delay_ms = ready_ms - writer_ready_ms;
    if (!best.found || better(c, best)) {
      best = c;
      best_i = i;
      best_j = j;
    }
  }
  for (size_t k = best_i; best.found && k < best_j; ++k) {
    if (segs[k].owner != kNoBuffer) best.victims.push_back(segs[k].owner);
  }
  return best;
}

BufferId Scheduler::new_buffer(BlockId block, TaskId workspace_of, int32_t r, int64_t bytes,
                               int64_t offset, int32_t inst) {
  auto id = static_cast<BufferId>(buffers_.size());
  buffers_.push_back(Buffer{id, block, workspace_of, r, bytes, offset, false});
  BufferState bs;
  bs.instance = inst;
  // The reuse rule: collect the last users of every freed range it overlaps.
  bs.must_follow = freed_.take(offset, offset + mm_.reserved_bytes(bytes));
  bstate_.push_back(bs);
  timeline_.issue_host(buffer_step(StepKind::alloc, id, r));
  return id;
}

std::optional<int64_t> Scheduler::obtain(int64_t bytes, int writer_slot, int64_t horizon) {
  // Placement ids are buffer ids: the next buffer to be made.
  auto id = static_cast<AllocationId>(buffers_.size());
  if (auto off = mm_.allocate(id, bytes)) return off;
  Scheme s = find_scheme(bytes, writer_slot, horizon);
  if (!s.found) return std::nullopt;
  for (BufferId v : s.victims) evict(bstate_[v].instance);
  mm_.allocate_at(id, bytes, s.begin);
  return s.begin;
}

void Scheduler::free_buffer(BufferId buf) {
  const Buffer& b = buffers_[buf];
  // A buffer freed before its first writer passes on what that writer owed.
  freed_.add(b.offset, b.offset + mm_.reserved_bytes(b.bytes),
             merge_slot_steps(bstate_[buf].users, bstate_[buf].must_follow));
  if (!bstate_[buf].in_pool) mm_.free(buf);
  timeline_.issue_host(buffer_step(StepKind::free, buf, b.round));
}

// Offloads (if the host has no current copy) and frees (§IV-B.1: a block
// already on the host is only freed).
void Scheduler::evict(int32_t inst) {
  InstanceState& s = inst_[inst];
  BufferId buf = s.buffer;
  MPLAN_CHECK(buf != kNoBuffer, "evicting a block that is not on the device");
  if (s.created && !s.host_valid) {
    if (s.host_slot == kNoHostSlot) {
      s.host_slot =
          add_host_slot(host_slots_, host_bytes_, buffers_[buf].block, buffers_[buf].round, buffers_[buf].bytes);
    }
    int slot = timeline_.d2h_slot();
    int32_t step = timeline_.issue(buffer_step(StepKind::offload, buf, buffers_[buf].round, s.host_slot), slot,
                                   cost_.device_to_host_ms(buffers_[buf].bytes),
                                   offload_predecessors(timeline_, bstate_[buf]));
    record_offload(bstate_[buf], slot, step, buffers_[buf].bytes, summary_);
    s.host_writer = step;
    s.host_valid = true;
  }
  free_buffer(buf);
  s.buffer = kNoBuffer;
}

// Allocates at `offset` (already placed) and copies the host's content in.
void Scheduler::load(int32_t inst, int64_t offset) {
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  InstanceState& s = inst_[inst];
  BlockId block = inst % nb;
  int32_t r = inst / nb;
  int64_t bytes = instance_bytes(inst);
  BufferId buf = new_buffer(block, kNoTask, r, bytes, offset, inst);
  if (s.host_slot == kNoHostSlot) {
    MPLAN_CHECK(host_sourced(block), "loading a block with no host copy");
    s.host_slot = add_host_slot(host_slots_, host_bytes_, block, r, bytes);
  }
  int slot = timeline_.h2d_slot();
  // After the users of the range and after the offload that filled the host copy.
  int32_t step = timeline_.issue(buffer_step(StepKind::prefetch, buf, r, s.host_slot), slot,
                                 cost_.host_to_device_ms(bytes),
                                 prefetch_predecessors(timeline_, bstate_[buf], s.host_writer));
  record_prefetch(bstate_[buf], slot, step);
  s.buffer = buf;
  s.used_since_arrival = false;
  s.created = true;
  s.host_valid = true;  // the content came from the host
  if (host_sourced(block) && !s.loaded_once) {
    summary_.input_load_count++;
    summary_.input_bytes += bytes;
  } else {
    summary_.prefetch_count++;
    summary_.bytes_to_device += bytes;
  }
  s.loaded_once = true;
}

// Algorithm 1 lines 3-8: allocate missing inputs (and load them) and outputs.
bool Scheduler::prepare(int32_t r, int32_t k) {
  const TaskBlocks& tb = blocks_of_[k];
  int64_t here = pos(r, k);
  for (BlockId b : tb.inputs) {
    int32_t i = inst_index(r, b);
    if (inst_[i].buffer != kNoBuffer) continue;
    auto off = obtain(instance_bytes(i), timeline_.h2d_slot(), here);
    if (!off) return false;
    load(i, *off);
  }
  for (BlockId b : tb.outputs) {
    int32_t i = inst_index(r, b);
    if (inst_[i].buffer != kNoBuffer) continue;
    auto off = obtain(instance_bytes(i), kComputeSlot, here);
    if (!off) return false;
    inst_[i].buffer = new_buffer(b, kNoTask, r, instance_bytes(i), *off, i);
  }
  return true;
}

// Algorithm 1 lines 9-14 and Eq. 5: gain = T_base - T_alg - T_off,alg -
// T_pre,alg(s), with T_base the leanest option, T_off the delay of the
// offloading its workspace forces (Fig. 3), and T_pre the delay of the
// prefetch for the nearest task s that needs one if the workspace leaves too
// little room to start it before t ends. Allocates the chosen workspace.
bool Scheduler::choose_option(int32_t r, int32_t k, TaskChoice* choice) {
  TaskId t = order_[k];
  const std::vector<TaskOption>& opts = options_of(t, r);
  size_t lean = 0;
  for (size_t i = 1; i < opts.size(); ++i) {
    if (opts[i].workspace_bytes < opts[lean].workspace_bytes) lean = i;
  }
  int64_t here = pos(r, k);
  double now_ms = timeline_.free_at_ms(kComputeSlot);
  // The nearest future task needing a prefetch, its bytes and transfer time.
  int64_t prefetch_need = 0;
  double prefetch_ms = 0, gap_ms = 0;
  bool select = opt_.select_algorithms && tdfg_.tasks[t].has_algorithms && opts.size() > 1;
  if (select && opt_.prefetch) {
    int64_t last = pos(static_cast<int32_t>(opt_.sub_batches.size()) - 1, n_ - 1);
    for (int64_t p = here + 1; p <= std::min(last, here + opt_.prefetch_lookahead_tasks); ++p) {
      auto sr = static_cast<int32_t>(p / n_);
      auto sk = static_cast<int32_t>(p % n_);
      for (BlockId b : blocks_of_[sk].inputs) {
        int32_t i = inst_index(sr, b);
        if (inst_[i].buffer == kNoBuffer && (inst_[i].host_valid || host_sourced(b))) {
          prefetch_need += mm_.reserved_bytes(instance_bytes(i));
          prefetch_ms += cost_.host_to_device_ms(instance_bytes(i));
        }
      }
      if (prefetch_need > 0) break;
      gap_ms += fast_time(p);
    }
  }
  std::vector<size_t> candidates;
  if (select) for (size_t i = 0; i < opts.size(); ++i) candidates.push_back(i);
  else candidates.push_back(lean);
  double best_gain = -std::numeric_limits<double>::infinity();
  size_t best = opts.size();
  const bool pooled = in_pool(t, r);
  for (size_t i : candidates) {
    const TaskOption& o = opts[i];
    double off_ms = 0;
    if (pooled) {
      // The workspace lies in the wd pool: it displaces nothing.
    } else if (o.workspace_bytes > 0 && !mm_.fits(o.workspace_bytes)) {
      Scheme s = find_scheme(o.workspace_bytes, kComputeSlot, here);
      if (!s.found) continue;
      off_ms = s.delay_ms;
    }
    double pre_ms = 0;
    if (!pooled && prefetch_need > 0 && o.workspace_bytes > 0 &&
        mm_.free_bytes() - mm_.reserved_bytes(o.workspace_bytes) < prefetch_need) {
      // The prefetch waits for t to end: s is delayed by what does not overlap.
      double start = std::max(now_ms + off_ms + o.time_ms, timeline_.free_at_ms(timeline_.h2d_slot()));
      pre_ms = std::max(0.0, start + prefetch_ms - (now_ms + o.time_ms + gap_ms));
    }
    double gain = opts[lean].time_ms - o.time_ms - off_ms - pre_ms;
    if (gain > best_gain) {
      best_gain = gain;
      best = i;
    }
  }
  if (best == opts.size()) return false;
  const TaskOption& o = opts[best];
  choice->task = t;
  choice->round = r;
  choice->sub_batch = opt_.sub_batches[r];
  choice->algorithm = o.algorithm;
  choice->time_ms = o.time_ms;
  choice->workspace_bytes = o.workspace_bytes;
  choice->gain_ms = select ? best_gain : 0;
  choice->micro_batches = micro_cache_.at({t, opt_.sub_batches[r]})[best];
  choice->workspace = kNoBuffer;
  choice->workspace_offset = -1;
  if (o.workspace_bytes > 0 && pooled) {
    MPLAN_CHECK(mm_.reserved_bytes(o.workspace_bytes) <= opt_.arena_bytes - pool_offset_,
                "task " + tdfg_.tasks[t].name + "'s workspace exceeds the wd pool");
    choice->workspace = new_buffer(kNoBlock, t, r, o.workspace_bytes, pool_offset_, -1);
    bstate_[choice->workspace].in_pool = true;
    choice->workspace_offset = pool_offset_;
    pool_peak_end_ = std::max(pool_peak_end_, pool_offset_ + mm_.reserved_bytes(o.workspace_bytes));
  } else if (o.workspace_bytes > 0) {
    auto off = obtain(o.workspace_bytes, kComputeSlot, here);
    if (!off) return false;
    choice->workspace = new_buffer(kNoBlock, t, r, o.workspace_bytes, *off, -1);
    choice->workspace_offset = *off;
  }
  return true;
}

// Algorithm 1 lines 15-27: for the next tasks s, prefetch the inputs that are
// on the host when starting after t would delay s (Eq. 4); stop at the first
// s that need not start now, that would not fit beside t (line 16, predicted
// by comparing its need and t's with the arena), or for which no room can be
// made without touching blocks needed up to s.
void Scheduler::prefetch_ahead(int32_t r, int32_t k, double task_ms) {
  if (!opt_.prefetch) return;
  int64_t here = pos(r, k);
  int64_t last = pos(static_cast<int32_t>(opt_.sub_batches.size()) - 1, n_ - 1);
  int64_t t_need = 0;
  {
    const TaskBlocks& tb = blocks_of_[k];
    for (BlockId b : tb.inputs) t_need += mm_.reserved_bytes(instance_bytes(inst_index(r, b)));
    for (BlockId b : tb.outputs) t_need += mm_.reserved_bytes(instance_bytes(inst_index(r, b)));
  }
  double t_end_ms = timeline_.free_at_ms(kComputeSlot) + task_ms;
  double est_ms = t_end_ms;  // EST(s), from the fastest options of the tasks between
  for (int64_t p = here + 1; p <= std::min(last, here + opt_.prefetch_lookahead_tasks); ++p) {
    auto sr = static_cast<int32_t>(p / n_);
    auto sk = static_cast<int32_t>(p % n_);
    const TaskBlocks& tb = blocks_of_[sk];
    std::vector<int32_t> missing;
    int64_t s_need = 0;
    double trans_ms = 0;
    for (BlockId b : tb.inputs) {
      int32_t i = inst_index(sr, b);
      s_need += mm_.reserved_bytes(instance_bytes(i));
      if (inst_[i].buffer == kNoBuffer && (inst_[i].host_valid || (host_sourced(b) && !inst_[i].created))) {
        missing.push_back(i);
        trans_ms += cost_.host_to_device_ms(instance_bytes(i));
      }
    }
    for (BlockId b : tb.outputs) s_need += mm_.reserved_bytes(instance_bytes(inst_index(sr, b)));
    if (s_need + t_need > mm_.capacity_bytes()) return;  // line 16
    if (!missing.empty()) {
      // Eq. 4: T + Talg(t) + sum Ttrans(d) > EST(s) -> start now.
      double start_ms = std::max(t_end_ms, timeline_.free_at_ms(timeline_.h2d_slot()));
      if (!(start_ms + trans_ms > est_ms)) return;  // lines 26-27
      for (int32_t i : missing) {
        auto off = obtain(instance_bytes(i), timeline_.h2d_slot(), p);
        if (!off) return;  // lines 21-25
        load(i, *off);
      }
    }
    est_ms += fast_time(p);
  }
}

// §IV-B.1: offload everything (blocks already on the host are only freed);
// the caller then reloads what the task needs.
void Scheduler::defragment() {
  std::vector<BufferId> live;
  for (const auto& [begin, s] : mm_.by_address()) {
    if (!s.free()) live.push_back(s.owner);
  }
  for (BufferId buf : live) {
    int32_t i = bstate_[buf].instance;
    if (i < 0) {
      free_buffer(buf);
    } else if (inst_[i].created) {
      evict(i);
    } else {
      free_buffer(buf);  // an output not yet written: nothing to keep
      inst_[i].buffer = kNoBuffer;
    }
  }
  summary_.defragmentation_count++;
}

void Scheduler::run_task(int32_t r, int32_t k) {
  cur_r_ = r;
  cur_k_ = k;
  TaskId t = order_[k];
  TaskChoice choice;
  bool ok = prepare(r, k) && choose_option(r, k, &choice);
  if (!ok) {
    defragment();
    ok = prepare(r, k) && choose_option(r, k, &choice);
  }
  MPLAN_CHECK(ok, "task " + tdfg_.tasks[t].name + " does not fit the arena even alone");
  prefetch_ahead(r, k, choice.time_ms);

  // Line 28: run t after its inputs' writers and its outputs' earlier users.
  const Task& task = tdfg_.tasks[t];
  Step st;
  st.kind = StepKind::compute;
  st.task = t;
  st.round = r;
  auto buffer_of = [&](BlockId b) {
    return tdfg_.blocks[b].resident ? resident_buffer_[b] : inst_[inst_index(r, b)].buffer;
  };
  for (BlockId b : task.reads) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "input not on the device");
    st.reads.push_back(buf);
  }
  for (BlockId b : task.writes) {
    BufferId buf = buffer_of(b);
    MPLAN_CHECK(buf != kNoBuffer, "output not on the device");
    st.writes.push_back(buf);
  }
  st.workspace = choice.workspace;
  // Read after write; write after every earlier user and after the users of what was there before.
  const SlotSteps after = compute_predecessors(timeline_, st, bstate_);
  int32_t step = timeline_.issue(std::move(st), kComputeSlot, choice.time_ms, after);
  record_compute(timeline_.step(step), step, bstate_);
  for (BlockId b : task.reads) {
    if (!tdfg_.blocks[b].resident) inst_[inst_index(r, b)].used_since_arrival = true;
  }
  const TaskBlocks& tb = blocks_of_[k];
  for (BlockId b : tb.inputs) {
    InstanceState& s = inst_[inst_index(r, b)];
    if (std::find(task.writes.begin(), task.writes.end(), b) != task.writes.end()) s.host_valid = false;
  }
  for (BlockId b : tb.outputs) {
    InstanceState& s = inst_[inst_index(r, b)];
    s.created = true;
    s.host_valid = false;
    s.used_since_arrival = false;
  }
  choices_.push_back(choice);

  // Lines 29-31: free what no later task of the round uses, and the workspace.
  if (choice.workspace != kNoBuffer) {
    free_buffer(choice.workspace);
  }
  for (const std::vector<BlockId>* list : {&tb.inputs, &tb.outputs}) {
    for (BlockId b : *list) {
      if (uses_[b].back() != k) continue;
      InstanceState& s = inst_[inst_index(r, b)];
      free_buffer(s.buffer);
      s.buffer = kNoBuffer;
    }
  }
}

void Scheduler::run_update() {
  TaskId t = tdfg_.update_task;
  cur_r_ = static_cast<int32_t>(opt_.sub_batches.size());
  cur_k_ = 0;
  const TaskOption& o = options_of(t, kOnceRound).front();
  choices_.push_back(issue_update(tdfg_, o, resident_buffer_, timeline_, bstate_));
}

std::optional<Plan> Scheduler::run() {
  MPLAN_CHECK(!opt_.sub_batches.empty(), "no rounds");
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
    if (t != tdfg_.update_task) order_.push_back(t);
  }
  n_ = static_cast<int32_t>(order_.size());
  auto nb = static_cast<int32_t>(tdfg_.blocks.size());
  uses_ = block_uses(tdfg_, order_);
  blocks_of_.clear();
  for (int32_t k = 0; k < n_; ++k) blocks_of_.push_back(task_blocks(tdfg_, order_[k]));
  inst_.assign(static_cast<size_t>(nb) * opt_.sub_batches.size(), InstanceState{});
  next_use_cache_.assign(inst_.size(), -1);
  // Resident blocks: fixed offsets in the resident region, block order.
  const int64_t resident_offset = place_resident_blocks(tdfg_, buffers_, resident_buffer_);
  bstate_.resize(buffers_.size());
  // The arena manager's ids are buffer ids; resident ids are never placed there.
  for (int32_t r = 0; r < static_cast<int32_t>(opt_.sub_batches.size()); ++r) {
    for (int32_t k = 0; k < n_; ++k) {
      run_task(r, k);
      if (opt_.abandon_after_ms > 0 && timeline_.free_at_ms(kComputeSlot) > opt_.abandon_after_ms) {
        return std::nullopt;
      }
    }
  }
  if (tdfg_.update_task != kNoTask) run_update();

  Plan plan = finish_plan(SimulatedParts{opt_.arena_bytes, resident_offset, host_bytes_, opt_.sub_batches,
                                         opt_.copy_engines, std::move(choices_), std::move(buffers_),
                                         std::move(host_slots_), summary_},
                          timeline_, mm_);
  plan.summary.peak_arena_bytes = std::max(plan.summary.peak_arena_bytes, pool_peak_end_);
  if (pool_peak_end_ > 0) {
    // The pool's largest workspace is live beside the blocks' peak at most.
    plan.summary.peak_live_bytes += pool_peak_end_ - pool_offset_;
    plan.summary.fragmentation =
        static_cast<double>(plan.summary.peak_arena_bytes) / static_cast<double>(plan.summary.peak_live_bytes) - 1;
  }
  return plan;
}

}  // namespace

Plan schedule_iteration(const Tdfg& tdfg, const CostModel& cost, const ScheduleOptions& options) {
  ScheduleOptions unbounded = options;
  unbounded.abandon_after_ms = 0;
  return *Scheduler(tdfg, cost, unbounded).run();
}

std::optional<Plan> schedule_iteration_within(const Tdfg& tdfg, const CostModel& cost,
                                              const ScheduleOptions& options) {
  return Scheduler(tdfg, cost, options).run();
}

}  // namespace mplan
