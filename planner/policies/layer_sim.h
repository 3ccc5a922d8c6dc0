#pragma once
// The layer-wise simulator the papers' baseline policies run on (vDNN,
// SuperNeurons, the ideal reference). It shares the memory manager
// (planner/memory_manager.h) and the stream model (planner/streams.h) with
// moDNN's scheduler and produces the same Plan, which the verifier checks;
// what differs is who decides. moDNN's Algorithm 1 decides by simulating the
// future (planner/scheduler.h); these runtimes decide per layer, as they go,
// with the rules of their papers, which a SchedulingPolicy answers:
//
//   which algorithm a task runs with (given the free memory at its step),
//   which blocks to offload while a task runs, which to prefetch before it,
//   whether the compute stream synchronises with the copies at a layer
//   boundary, which blocks to drop and recompute, and which blocks an
//   allocation failure may evict (SuperNeurons' LRU tensor cache).
//
// Common to every policy (vDNN §III-A, SuperNeurons §3.2): a block is
// allocated when it is first written or loaded and freed after its last use
// (liveness); blocks with no writer (the input batch, the labels) are loaded
// from the host at their first use; a block the current task needs and that
// is on the host is loaded on demand (the task waits for it). An allocation
// that fails after the policy's evictions makes the plan infeasible: these
// runtimes have no defragmentation and no sub-batch fallback of their own.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

class LayerSim;

// The decisions of a baseline runtime. Every hook has the "do nothing" default.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  // Called before the first task of each round.
  virtual void start_round(const LayerSim& /*sim*/, int32_t /*round*/) {}

  // The index in `options` (fastest first) task t runs with, knowing the
  // largest free range of the arena once its inputs and outputs are placed;
  // options.size() when none fits (the plan is infeasible).
  virtual size_t choose_option(const LayerSim& sim, TaskId t, const std::vector<TaskOption>& options,
                               int64_t largest_free_bytes) = 0;

  // Whether task t's compute step waits for every copy issued before its
  // prefetches and offloads (vDNN §III-B: streams synchronised at layer boundaries).
  virtual bool sync_before(const LayerSim& /*sim*/, TaskId /*t*/) { return false; }

  // Blocks of this round to bring back from the host before task t runs,
  // overlapping it. A prefetch that does not fit (after evictions) is skipped.
  virtual std::vector<BlockId> prefetch_before(const LayerSim& /*sim*/, TaskId /*t*/) { return {}; }

  // Blocks to copy to the host while task t runs and free after it (vDNN's
  // offload of a layer's input X during the layer's forward computation).
  virtual std::vector<BlockId> offload_with(const LayerSim& /*sim*/, TaskId /*t*/) { return {}; }

  // Whether block b (a layer output needed in the backward pass) is freed
  // after its last forward use and recomputed by its FP task when a backward
  // task needs it (SuperNeurons §3.4). Asked once per block per round.
  virtual bool recompute(const LayerSim& /*sim*/, BlockId /*b*/) { return false; }

  // Whether a recomputed block stays until its last use (speed-centric) or is
  // freed after the task that needed it and recomputed again (memory-centric).
  virtual bool keep_recomputed(const LayerSim& /*sim*/, BlockId /*b*/) { return true; }

  // Whether a failed allocation may evict block b (offloading it if the host
  // has no copy); candidates are tried least recently used first (SuperNeurons
  // §3.3.2, Alg. 2 LRU.out).
  virtual bool evictable(const LayerSim& /*sim*/, BlockId /*b*/) { return false; }
};

struct LayerSimOptions {
  std::vector<int64_t> sub_batches;  // samples per round
  int64_t arena_bytes = 0;
  int copy_engines = 1;              // 1: one shared copy stream (vDNN's stream_memory)
};

struct LayerSimResult {
  bool feasible = false;
  std::string failure;               // why not, naming the task and the bytes
  // Filled as in schedule_iteration (buffers, steps, choices, summary figures);
  // the caller fills the header. Empty when infeasible.
  Plan plan;
  int32_t recomputed_tasks = 0;      // compute steps that re-run an FP task
  std::vector<int32_t> recompute_steps;  // their step indices
  // Blocks the policy offloaded (or freed with a host copy) in round 0, each once.
  std::vector<BlockId> offloaded_blocks;
};

// Runs the iteration under `policy`.
LayerSimResult simulate_layerwise(const Tdfg& tdfg, const CostModel& cost, const LayerSimOptions& options,
                                  SchedulingPolicy& policy);

// What a policy may ask the simulator while it runs.
class LayerSim {
 public:
  virtual ~LayerSim() = default;
  virtual const Tdfg& tdfg() const = 0;
  virtual const CostModel& cost() const = 0;
  virtual int32_t round() const = 0;
  virtual int64_t sub_batch() const = 0;
  // Position of task t in the round's order (the update excluded), and the task at a position.
  virtual int32_t position(TaskId t) const = 0;
  virtual TaskId task_at(int32_t position) const = 0;
  virtual int32_t task_count() const = 0;
  // Where block b's instance of the current round is now.
  virtual bool on_device(BlockId b) const = 0;
  virtual bool on_host(BlockId b) const = 0;  // offloaded (the host has its current content)
  virtual bool dropped(BlockId b) const = 0;  // freed for recomputation
  // Positions in the round that read or write b, ascending.
  virtual const std::vector<int32_t>& uses(BlockId b) const = 0;
  virtual int64_t arena_bytes() const = 0;
};

}  // namespace mplan
