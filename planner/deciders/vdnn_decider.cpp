// vDNN (vDNN §III) as a Decider: offload a layer's input feature
// maps X while the layer's forward computation runs and release them when it
// ends (§III-B "Memory Offload"); in the backward pass, before each layer's
// backward computation, prefetch the X of the closest preceding offloaded
// layer, searching no further than the next conv layer (findPrefetchLayer,
// Fig. 10); the compute stream and the memory stream synchronise at every
// layer boundary (§III-B), so a copy that outlasts its layer's computation
// stalls the next layer. Nothing is evicted on a failed allocation: vDNN's
// runtime has no other lever, the plan is infeasible. The ideal is here too.

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "planner/deciders/deciders.h"

namespace mplan {
namespace {

size_t leanest_index(const std::vector<TaskOption>& options) {
  size_t lean = 0;
  for (size_t i = 1; i < options.size(); ++i)
    if (options[i].workspace_bytes < options[lean].workspace_bytes) lean = i;
  return lean;
}

class VdnnDecider final : public Decider {
 public:
  VdnnDecider(VdnnOffload offload, VdnnAlgorithms algorithms, VdnnSwapLayers swap)
      : offload_(offload), algorithms_(algorithms), swap_(swap) {}

  void start_round(IterationSim& sim, int32_t /*r*/) override {
    const size_t layers = sim.tdfg().fp_of.size();
    offloaded_by_layer_.assign(layers, {});
    prefetched_.assign(layers, false);
    previous_layer_ = kModelInput - 1;
    swap_candidates_ = 0;
  }

  std::optional<int64_t> make_room(IterationSim& /*sim*/, const RoomRequest& /*request*/) override {
    return std::nullopt;
  }

  size_t choose_option(IterationSim& sim, int32_t /*r*/, int32_t /*k*/, const std::vector<TaskOption>& options) override {
    switch (algorithms_) {
      case VdnnAlgorithms::memory_optimal: return leanest_index(options);
      case VdnnAlgorithms::performance_optimal: return 0;  // fastest first; fails if it does not fit
      case VdnnAlgorithms::greedy: {
        // §III-C pass 3: downgrade locally until the workspace fits, down to the leanest.
        const int64_t largest_free = sim.memory().largest_free_bytes();
        for (size_t i = 0; i < options.size(); ++i)
          if (options[i].workspace_bytes == 0 || align_up(options[i].workspace_bytes) <= largest_free) return i;
        return leanest_index(options);
      }
    }
    return 0;
  }

  // §III-B: at a layer boundary the compute stream waits for the copies issued
  // before it; Fig. 10: before a layer's backward computation, prefetch the
  // closest preceding layer that offloaded and is not yet prefetched (the
  // search stops at a conv layer).
  void before_task(IterationSim& sim, int32_t r, int32_t k) override {
    const Task& task = sim.tdfg().tasks[sim.task_at(k)];
    const bool boundary = task.layer != previous_layer_;
    previous_layer_ = task.layer;
    if (!boundary) return;
    sim.sync_compute_after(sim.last_copies());
    if (task.kind == TaskKind::FP || task.kind == TaskKind::update) return;
    const Tdfg& tdfg = sim.tdfg();
    // What this layer's task still has to place: a prefetch must leave room for it.
    int64_t needed = 0;
    for (BlockId b : sim.inputs_at(k))
      if (sim.state(sim.instance(r, b)).buffer == kNoBuffer) needed += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
    for (BlockId b : sim.outputs_at(k)) needed += sim.reserved_bytes(sim.instance_bytes(sim.instance(r, b)));
    for (LayerId id = task.layer - 1; id >= 0; --id) {
      if (!offloaded_by_layer_[id].empty() && !prefetched_[id]) {
        prefetched_[id] = true;
        for (BlockId b : offloaded_by_layer_[id]) {
          const int32_t i = sim.instance(r, b);
          const InstanceState& s = sim.state(i);
          // A prefetch that does not fit beside this layer is skipped (its
          // layer loads it on demand), as vDNN's allocator would refuse it.
          if (s.buffer != kNoBuffer || !s.host_valid) continue;
          const int64_t bytes = sim.reserved_bytes(sim.instance_bytes(i));
          if (sim.memory().free_bytes() - bytes < needed) continue;
          sim.load(i, RoomRequest{sim.instance_bytes(i), kH2dSlot, sim.here(), RoomRequest::Purpose::prefetch});
        }
        return;
      }
      if (tdfg.tasks[tdfg.fp_of[id]].paper_class == PaperClass::conv) return;
    }
  }

  // §III-B: a layer offloads its input X during its forward computation when
  // it is X's last forward consumer and the backward pass needs X again;
  // vDNN-all for every layer, vDNN-conv for conv layers.
  void before_issue(IterationSim& sim, int32_t r, int32_t k, double /*task_ms*/) override {
    releasing_.clear();
    const Tdfg& tdfg = sim.tdfg();
    const Task& task = tdfg.tasks[sim.task_at(k)];
    if (task.kind != TaskKind::FP || offload_ == VdnnOffload::none) return;
    if (offload_ == VdnnOffload::conv && task.paper_class != PaperClass::conv) return;
    // Multi-GPU vDNN Step 3: this GPU's share of the swapping layers.
    const int32_t candidate = swap_candidates_++;
    if (candidate % swap_.stride != swap_.offset) return;
    for (BlockId b : task.reads) {
      const Block& block = tdfg.blocks[b];
      if (block.resident || std::find(task.writes.begin(), task.writes.end(), b) != task.writes.end()) continue;
      if (block.kind != BlockKind::output && block.kind != BlockKind::input) continue;
      bool later_forward = false, backward = false;
      for (int32_t p : sim.uses(b)) {
        if (p <= k) continue;
        if (tdfg.tasks[sim.task_at(p)].kind == TaskKind::FP) later_forward = true;
        else backward = true;
      }
      if (later_forward || !backward) continue;
      if (std::find(releasing_.begin(), releasing_.end(), b) != releasing_.end()) continue;
      sim.offload(sim.instance(r, b));
      releasing_.push_back(b);
    }
    auto& list = offloaded_by_layer_[task.layer];
    list.insert(list.end(), releasing_.begin(), releasing_.end());
  }

  // The offloaded inputs are released when the layer's computation ends.
  void after_task(IterationSim& sim, int32_t r, int32_t /*k*/) override {
    for (BlockId b : releasing_) sim.release(sim.instance(r, b));
    releasing_.clear();
  }

 private:
  VdnnOffload offload_;
  VdnnAlgorithms algorithms_;
  VdnnSwapLayers swap_;
  int32_t swap_candidates_ = 0;  // layers of the round that could swap, so far
  std::vector<std::vector<BlockId>> offloaded_by_layer_;
  std::vector<bool> prefetched_;
  std::vector<BlockId> releasing_;
  LayerId previous_layer_ = kModelInput - 1;
};

class IdealDecider final : public Decider {
 public:
  std::optional<int64_t> make_room(IterationSim&, const RoomRequest&) override { return std::nullopt; }
  size_t choose_option(IterationSim&, int32_t, int32_t, const std::vector<TaskOption>&) override { return 0; }
};

}  // namespace

std::unique_ptr<Decider> make_vdnn_decider(VdnnOffload offload, VdnnAlgorithms algorithms, VdnnSwapLayers swap) {
  MPLAN_CHECK(swap.stride >= 1 && swap.offset >= 0 && swap.offset < swap.stride, "an offset below the stride");
  return std::make_unique<VdnnDecider>(offload, algorithms, swap);
}

std::unique_ptr<Decider> make_ideal_decider() { return std::make_unique<IdealDecider>(); }

}  // namespace mplan
