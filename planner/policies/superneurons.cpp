// SuperNeurons (papers/superneurons.txt §3) as a SchedulingPolicy:
// - liveness analysis (§3.2): every block freed after its last use (the simulator);
// - unified tensor pool with the tensor cache (§3.3): conv outputs (the
//   checkpoints) stay on the device until an allocation fails, then the least
//   recently used unlocked ones are offloaded (Alg. 2, LRU.out); in the
//   backward pass, at each conv layer, the tensors the backward computation
//   needs up to the previous conv layer are prefetched (§3.3.1 "Prefetching");
// - cost-aware recomputation (§3.4): outputs of cheap layers (ReLU, pooling,
//   LRN) are freed after the forward pass and recomputed in the backward pass,
//   kept for reuse (speed-centric) when the segment's memory stays within the
//   largest layer's need l_peak, recomputed for each use (memory-centric)
//   otherwise;
// - each conv task takes the fastest algorithm whose workspace fits the
//   memory free at its step (§3.5).
//
// Deviation, for the semantics of training: batch normalisation (which the
// paper also recomputes) and dropout are not recomputed here, since their
// forward pass writes state (running statistics, the mask); a recomputable
// task must write its output alone (layer_sim.cpp). A layer whose inputs
// would have to stay on the device only for its recomputation (e.g. a ReLU
// after a batchnorm) is not recomputed: that would save nothing.

#include <algorithm>
#include <vector>

#include "planner/plan.h"
#include "planner/policies/baselines.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace {

bool cheap_op(Op op) { return op == Op::relu || op == Op::pool || op == Op::lrn; }

class SuperNeuronsPolicy final : public SchedulingPolicy {
 public:
  void start_round(const LayerSim& sim, int32_t /*round*/) override {
    const Tdfg& tdfg = sim.tdfg();
    // §3.4 step 1: l_peak, the largest need of one layer (task) at this sub-batch.
    l_peak_bytes_ = 0;
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
      if (t == tdfg.update_task) continue;
      l_peak_bytes_ = std::max(l_peak_bytes_, task_arena_bytes(tdfg, t, sim.sub_batch(), 0));
    }
    previous_layer_ = kModelInput - 1;
    boundary_ = false;
  }

  // §3.5: the fastest algorithm whose workspace fits the free memory now.
  size_t choose_option(const LayerSim& /*sim*/, TaskId /*t*/, const std::vector<TaskOption>& options,
                       int64_t largest_free_bytes) override {
    size_t lean = 0;
    for (size_t i = 0; i < options.size(); ++i) {
      if (options[i].workspace_bytes == 0 || align_up(options[i].workspace_bytes) <= largest_free_bytes) return i;
      if (options[i].workspace_bytes < options[lean].workspace_bytes) lean = i;
    }
    return lean;
  }

  bool sync_before(const LayerSim& sim, TaskId t) override {
    LayerId layer = sim.tdfg().tasks[t].layer;
    boundary_ = layer != previous_layer_;
    previous_layer_ = layer;
    return false;  // no layer-boundary synchronisation: events only
  }

  // §3.3.1: at a conv layer of the backward pass, prefetch what the backward
  // tasks need up to (and including) the previous conv layer.
  std::vector<BlockId> prefetch_before(const LayerSim& sim, TaskId t) override {
    const Tdfg& tdfg = sim.tdfg();
    const Task& task = tdfg.tasks[t];
    if (!boundary_ || task.kind == TaskKind::FP || task.kind == TaskKind::update || task.op != Op::conv) return {};
    std::vector<BlockId> out;
    int32_t convs_seen = 0;
    LayerId layer = task.layer;
    constexpr int32_t kMaxLookahead = 256;  // keeps the policy linear on very deep models
    int32_t end = std::min(sim.task_count(), sim.position(t) + kMaxLookahead);
    for (int32_t p = sim.position(t) + 1; p < end; ++p) {
      const Task& s = tdfg.tasks[sim.task_at(p)];
      if (s.kind == TaskKind::FP) continue;
      if (s.layer != layer) {
        layer = s.layer;
        if (s.op == Op::conv && ++convs_seen > 1) break;  // past the previous conv layer
      }
      for (BlockId b : s.reads) collect(sim, b, &out, 0);
    }
    return out;
  }

  // §3.3: the tensor cache offloads conv outputs (and frees input data,
  // which the host holds).
  bool evictable(const LayerSim& sim, BlockId b) override {
    const Block& block = sim.tdfg().blocks[b];
    if (block.kind == BlockKind::input) return true;
    return block.kind == BlockKind::output && sim.tdfg().model->layers[block.layer].op == Op::conv;
  }

  bool recompute(const LayerSim& sim, BlockId b) override {
    const Block& block = sim.tdfg().blocks[b];
    return block.kind == BlockKind::output && cheap_op(sim.tdfg().model->layers[block.layer].op);
  }

  // §3.4 step 2: speed-centric if the segment's forward tensors and the
  // backward need of its last layer fit within l_peak, else memory-centric.
  bool keep_recomputed(const LayerSim& sim, BlockId b) override {
    const Tdfg& tdfg = sim.tdfg();
    int64_t segment = segment_bytes(sim, b, 0);
    int64_t backward = 0;
    for (TaskId r : tdfg.blocks[b].readers) {
      if (tdfg.tasks[r].kind != TaskKind::FP) backward = std::max(backward, task_arena_bytes(tdfg, r, sim.sub_batch(), 0));
    }
    return segment + backward <= l_peak_bytes_;
  }

 private:
  // Bytes of b and of its recomputable ancestors up to the checkpoints.
  int64_t segment_bytes(const LayerSim& sim, BlockId b, int depth) {
    const Tdfg& tdfg = sim.tdfg();
    const Block& block = tdfg.blocks[b];
    int64_t bytes = align_up(block.bytes(sim.sub_batch()));
    if (depth > 16 || block.kind != BlockKind::output) return bytes;
    const Task& fp = tdfg.tasks[tdfg.fp_of[block.layer]];
    for (BlockId x : fp.reads) {
      const Block& in = tdfg.blocks[x];
      if (!in.resident && in.kind == BlockKind::output && cheap_op(tdfg.model->layers[in.layer].op))
        bytes += segment_bytes(sim, x, depth + 1);
    }
    return bytes;
  }

  // Adds b if it is on the host, or what its recomputation needs from the host.
  void collect(const LayerSim& sim, BlockId b, std::vector<BlockId>* out, int depth) {
    const Tdfg& tdfg = sim.tdfg();
    if (tdfg.blocks[b].resident || depth > 16 || std::find(out->begin(), out->end(), b) != out->end()) return;
    if (sim.on_host(b)) {
      out->push_back(b);
    } else if (sim.dropped(b)) {
      for (BlockId x : tdfg.tasks[tdfg.fp_of[tdfg.blocks[b].layer]].reads) collect(sim, x, out, depth + 1);
    }
  }

  int64_t l_peak_bytes_ = 0;
  LayerId previous_layer_ = kModelInput - 1;
  bool boundary_ = false;
};

}  // namespace

LayerSimResult run_superneurons(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run) {
  SuperNeuronsPolicy policy;
  LayerSimOptions o;
  o.sub_batches = run.sub_batches;
  o.arena_bytes = run.arena_bytes;
  o.copy_engines = run.copy_engines;
  return simulate_layerwise(tdfg, cost, o, policy);
}

}  // namespace mplan
