// vDNN (papers/vdnn.txt §III) as a SchedulingPolicy: offload a layer's input
// feature maps X while the layer's forward computation runs and release them
// when it ends (§III-B "Memory Offload"); in the backward pass, before each
// layer's backward computation, prefetch the X of the closest preceding
// offloaded layer, searching no further than the next conv layer
// (findPrefetchLayer, Fig. 10); the compute stream and the memory stream
// synchronise at every layer boundary (§III-B), so a copy that outlasts its
// layer's computation stalls the next layer.

#include <algorithm>
#include <vector>

#include "planner/plan.h"
#include "planner/policies/baselines.h"

namespace mplan {
namespace {

size_t leanest_index(const std::vector<TaskOption>& options) {
  size_t lean = 0;
  for (size_t i = 1; i < options.size(); ++i) {
    if (options[i].workspace_bytes < options[lean].workspace_bytes) lean = i;
  }
  return lean;
}

class VdnnPolicy final : public SchedulingPolicy {
 public:
  VdnnPolicy(VdnnOffload offload, VdnnAlgorithms algorithms) : offload_(offload), algorithms_(algorithms) {}

  void start_round(const LayerSim& sim, int32_t /*round*/) override {
    size_t layers = sim.tdfg().model->layers.size();
    offloaded_by_layer_.assign(layers, {});
    prefetched_.assign(layers, false);
    previous_layer_ = kModelInput - 1;
    boundary_ = false;
  }

  size_t choose_option(const LayerSim& /*sim*/, TaskId /*t*/, const std::vector<TaskOption>& options,
                       int64_t largest_free_bytes) override {
    switch (algorithms_) {
      case VdnnAlgorithms::memory_optimal: return leanest_index(options);
      case VdnnAlgorithms::performance_optimal: return 0;  // fastest first; fails if it does not fit
      case VdnnAlgorithms::greedy:
        // §III-C pass 3: downgrade locally until the workspace fits, down to the leanest.
        for (size_t i = 0; i < options.size(); ++i) {
          if (options[i].workspace_bytes == 0 || align_up(options[i].workspace_bytes) <= largest_free_bytes)
            return i;
        }
        return leanest_index(options);
    }
    return 0;
  }

  // Called first for every task: notes whether it starts a new layer.
  bool sync_before(const LayerSim& sim, TaskId t) override {
    LayerId layer = sim.tdfg().tasks[t].layer;
    boundary_ = layer != previous_layer_;
    previous_layer_ = layer;
    return boundary_;
  }

  // Fig. 10: before a layer's backward computation, the closest preceding
  // layer that offloaded and is not yet prefetched; the search stops at a conv layer.
  std::vector<BlockId> prefetch_before(const LayerSim& sim, TaskId t) override {
    const Task& task = sim.tdfg().tasks[t];
    if (!boundary_ || task.kind == TaskKind::FP || task.kind == TaskKind::update) return {};
    const std::vector<Layer>& layers = sim.tdfg().model->layers;
    for (LayerId id = task.layer - 1; id >= 0; --id) {
      if (!offloaded_by_layer_[id].empty() && !prefetched_[id]) {
        prefetched_[id] = true;
        std::vector<BlockId> out;
        for (BlockId b : offloaded_by_layer_[id]) {
          if (sim.on_host(b)) out.push_back(b);
        }
        return out;
      }
      if (layers[id].op == Op::conv) return {};
    }
    return {};
  }

  // §III-B: a layer offloads its input X during its forward computation when
  // it is X's last forward consumer (the refcount of Fig. 3) and the backward
  // pass needs X again; vDNN-all for every layer, vDNN-conv for conv layers.
  std::vector<BlockId> offload_with(const LayerSim& sim, TaskId t) override {
    const Tdfg& tdfg = sim.tdfg();
    const Task& task = tdfg.tasks[t];
    if (task.kind != TaskKind::FP || offload_ == VdnnOffload::none) return {};
    if (offload_ == VdnnOffload::conv && task.op != Op::conv) return {};
    std::vector<BlockId> out;
    int32_t here = sim.position(t);
    for (BlockId b : task.reads) {
      const Block& block = tdfg.blocks[b];
      if (block.resident || std::find(task.writes.begin(), task.writes.end(), b) != task.writes.end()) continue;
      if (block.kind != BlockKind::output && block.kind != BlockKind::input) continue;
      if (std::find(out.begin(), out.end(), b) != out.end()) continue;
      // Last forward consumer, and a later (backward) use.
      bool later_forward = false, backward = false;
      for (int32_t p : sim.uses(b)) {
        if (p <= here) continue;
        if (tdfg.tasks[sim.task_at(p)].kind == TaskKind::FP) later_forward = true;
        else backward = true;
      }
      if (later_forward || !backward) continue;
      out.push_back(b);
    }
    offloaded_by_layer_[task.layer].insert(offloaded_by_layer_[task.layer].end(), out.begin(), out.end());
    return out;
  }

 private:
  VdnnOffload offload_;
  VdnnAlgorithms algorithms_;
  std::vector<std::vector<BlockId>> offloaded_by_layer_;
  std::vector<bool> prefetched_;
  LayerId previous_layer_ = kModelInput - 1;
  bool boundary_ = false;
};

class IdealPolicy final : public SchedulingPolicy {
 public:
  size_t choose_option(const LayerSim&, TaskId, const std::vector<TaskOption>&, int64_t) override { return 0; }
};

}  // namespace

LayerSimResult run_vdnn(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run, VdnnOffload offload,
                        VdnnAlgorithms algorithms) {
  VdnnPolicy policy(offload, algorithms);
  LayerSimOptions o;
  o.sub_batches = run.sub_batches;
  o.arena_bytes = run.arena_bytes;
  o.copy_engines = run.copy_engines;
  return simulate_layerwise(tdfg, cost, o, policy);
}

VdnnDynResult run_vdnn_dyn(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run) {
  using O = VdnnOffload;
  using A = VdnnAlgorithms;
  // Pass 1: the least memory; if it fails, nothing will.
  LayerSimResult first = run_vdnn(tdfg, cost, run, O::all, A::memory_optimal);
  if (!first.feasible) return {std::move(first), "pass 1 (all, memory-optimal) does not fit"};
  struct Pass {
    O offload;
    A algorithms;
    const char* name;
  };
  const Pass passes[] = {
      {O::none, A::performance_optimal, "pass 2 (no offload, fastest)"},
      {O::conv, A::performance_optimal, "pass 2 (conv, fastest)"},
      {O::all, A::performance_optimal, "pass 2 (all, fastest)"},
      {O::conv, A::greedy, "pass 3 (conv, greedy downgrade)"},
      {O::all, A::greedy, "pass 3 (all, greedy downgrade)"},
  };
  for (const Pass& p : passes) {
    LayerSimResult r = run_vdnn(tdfg, cost, run, p.offload, p.algorithms);
    if (r.feasible) return {std::move(r), p.name};
  }
  return {std::move(first), "pass 1 (all, memory-optimal)"};
}

LayerSimResult run_ideal(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  IdealPolicy policy;
  LayerSimOptions o;
  o.sub_batches = {batch};
  o.arena_bytes = int64_t{1} << 52;  // 4 PiB: unlimited
  o.copy_engines = 2;
  return simulate_layerwise(tdfg, cost, o, policy);
}

}  // namespace mplan
