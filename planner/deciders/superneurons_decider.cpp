// SuperNeurons (SuperNeurons §3) as a Decider:
// - liveness analysis (§3.2): every block freed after its last use (the simulator);
// - unified tensor pool with the tensor cache (§3.3): conv and FC outputs (the
//   checkpoints) stay on the device until an allocation fails, then the least
//   recently used unlocked ones are offloaded, then other unlocked tensors
//   (Alg. 2, LRU.out); in the
//   backward pass, at each conv layer, the tensors the backward computation
//   needs up to the previous conv layer are prefetched (§3.3.1 "Prefetching");
// - cost-aware recomputation (§3.4): outputs of cheap layers (activation,
//   pooling, LRN, batch normalisation) are freed after the forward pass and
//   recomputed in the backward pass, kept for reuse (speed-centric) when the
//   segment's memory stays within the largest layer's need l_peak, recomputed
//   for each use (memory-centric) otherwise;
// - each conv task takes the fastest algorithm whose workspace fits the
//   memory free at its step (§3.5).
//
// Batch normalisation is recomputed exactly from its saved statistics
// (Task::recompute_reads); dropout, which the paper does not list, is not
// recomputed. A ReLU computed in place shares its input's block, so it is
// recomputed only together with that block's other writers (a batchnorm's
// output, not a conv's). A layer whose inputs would have to stay on the device
// only for its recomputation is not recomputed: that would save nothing.

#include <algorithm>
#include <vector>

#include "planner/deciders/deciders.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace {

// §3.4: the cheap layers (POOL, ACT, LRN, BN) are recomputed; the op table says which.
bool cheap_task(const Task& task) { return task.paper_class == PaperClass::cheap; }

class SuperNeuronsDecider final : public Decider {
 public:
  // SuperNeurons' heap has no defragmentation. Where holes alone stop an
  // allocation (LRU.out found enough free bytes but not in one range), this
  // decider falls back to moDNN's: evict everything and reload what the layer
  // needs, so that a budget that holds the layer's tensors is never refused
  // for where earlier tensors happened to lie (the comparison is of levers,
  // not of allocators).
  bool defragment_on_failure() const override { return true; }

  void start_round(IterationSim& sim, int32_t r) override {
    const Tdfg& tdfg = sim.tdfg();
    // §3.4 step 1: l_peak, the largest need of one layer (task) at this sub-batch.
    l_peak_bytes_ = 0;
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
      if (t == tdfg.update_task) continue;
      l_peak_bytes_ = std::max(l_peak_bytes_, task_arena_bytes(tdfg, t, sim.sub_batch(r), 0));
    }
    previous_layer_ = kModelInput - 1;
    dropping_.assign(tdfg.blocks.size(), false);
    keep_.assign(tdfg.blocks.size(), true);
  }

  // §3.3: the checkpoints, the outputs of compute-intensive layers (CONV and
  // FC), and input data (which the host has).
  bool cached(const IterationSim& sim, BlockId b) const {
    const Block& block = sim.tdfg().blocks[b];
    if (block.kind == BlockKind::input) return true;
    const Tdfg& tdfg = sim.tdfg();
    const PaperClass c = tdfg.tasks[tdfg.fp_of[block.layer]].paper_class;
    return block.kind == BlockKind::output && (c == PaperClass::conv || c == PaperClass::fully_connected);
  }

  bool may_drop(const IterationSim& sim, BlockId b) override {
    const Tdfg& tdfg = sim.tdfg();
    for (TaskId w : tdfg.blocks[b].writers)
      if (!cheap_task(tdfg.tasks[w])) return false;
    // Its recomputation's inputs must be kept anyway: checkpoints, host data,
    // recomputed themselves, or needed until after b is (batchnorm's saved statistics).
    for (TaskId w : tdfg.blocks[b].writers)
      for (BlockId x : tdfg.tasks[w].recompute_reads) {
        if (tdfg.blocks[x].resident || x == b) continue;
        const bool kept = !sim.uses(x).empty() && sim.uses(x).back() >= sim.uses(b).back();
        if (!cached(sim, x) && !sim.host_sourced(x) && !dropping_[x] && !kept) return false;
      }
    dropping_[b] = true;
    keep_[b] = keep_recomputed(sim, b);
    return true;
  }

  // §3.5: the fastest algorithm whose workspace fits the free memory now.
  size_t choose_option(IterationSim& sim, int32_t, int32_t, const std::vector<TaskOption>& options) override {
    return fastest_fitting_option(sim, options);
  }

  // Alg. 2 LRU.out: offload the least recently used unlocked tensors (not
  // used by the running layer) until the request fits, checkpoints first
  // (§3.3.1 offloads only them), then any tensor of the cache (Alg. 2 takes
  // every unlocked one). Prefetches and workspaces never evict.
  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& request) override {
    if (request.purpose == RoomRequest::Purpose::workspace || request.purpose == RoomRequest::Purpose::prefetch)
      return std::nullopt;
    for (bool checkpoints_only : {true, false}) {
      while (!sim.memory().fits(request.bytes)) {
        int32_t victim = -1;
        for (const auto& [stamp, inst] : sim.lru()) {
          const BlockId b = sim.block_of(inst);
          if (!sim.locked(inst) && sim.state(inst).created && (!checkpoints_only || cached(sim, b))) {
            victim = inst;
            break;
          }
        }
        if (victim < 0) break;
        if (dropping_[sim.block_of(victim)] && sim.droppable(victim)) sim.drop(victim);
        else sim.evict(victim);
      }
    }
    if (!sim.memory().fits(request.bytes)) return std::nullopt;
    return IterationSim::kBestFit;
  }

  // §3.3.1: at a conv layer of the backward pass, prefetch what the backward
  // tasks need up to (and including) the previous conv layer.
  void before_task(IterationSim& sim, int32_t r, int32_t k) override {
    const Tdfg& tdfg = sim.tdfg();
    const Task& task = tdfg.tasks[sim.task_at(k)];
    const bool boundary = task.layer != previous_layer_;
    previous_layer_ = task.layer;
    if (!boundary || task.kind == TaskKind::FP || task.kind == TaskKind::update || task.paper_class != PaperClass::conv) return;
    std::vector<int32_t> wanted;
    int32_t convs_seen = 0;
    LayerId layer = task.layer;
    constexpr int32_t kMaxLookahead = 256;  // keeps the policy linear on very deep models
    const int32_t end = std::min(sim.task_count(), k + kMaxLookahead);
    for (int32_t p = k + 1; p < end; ++p) {
      const Task& s = tdfg.tasks[sim.task_at(p)];
      if (s.kind == TaskKind::FP) continue;
      if (s.layer != layer) {
        layer = s.layer;
        if (s.paper_class == PaperClass::conv && ++convs_seen > 1) break;  // past the previous conv layer
      }
      for (BlockId b : s.reads)
        if (!tdfg.blocks[b].resident) sim.missing_inputs(sim.instance(r, b), &wanted);
    }
    for (int32_t i : wanted) {
      if (sim.state(i).buffer != kNoBuffer) continue;
      sim.load(i, RoomRequest{sim.instance_bytes(i), kH2dSlot, sim.here(), RoomRequest::Purpose::prefetch});
    }
  }

  // After its forward use, a recomputed block is dropped (its next use is
  // backward); a memory-centric one is dropped again after each use.
  void after_task(IterationSim& sim, int32_t r, int32_t k) override {
    const Tdfg& tdfg = sim.tdfg();
    const Task& task = tdfg.tasks[sim.task_at(k)];
    for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
      for (BlockId b : *list) {
        if (!dropping_[b]) continue;
        const int32_t i = sim.instance(r, b);
        if (!sim.droppable(i)) continue;
        const std::vector<int32_t>& u = sim.uses(b);
        auto next = std::upper_bound(u.begin(), u.end(), k);
        if (next == u.end()) continue;  // freed by liveness
        const bool backward_next = tdfg.tasks[sim.task_at(*next)].kind != TaskKind::FP;
        if ((task.kind == TaskKind::FP && backward_next) || (task.kind != TaskKind::FP && !keep_[b])) sim.drop(i);
      }
    }
  }

 private:
  // §3.4 step 2: speed-centric if the segment's forward tensors and the
  // backward need of its last layer fit within l_peak, else memory-centric.
  bool keep_recomputed(const IterationSim& sim, BlockId b) const {
    const Tdfg& tdfg = sim.tdfg();
    const int64_t sub_batch = sim.sub_batch(sim.current_round());
    int64_t segment = segment_bytes(sim, b, 0);
    int64_t backward = 0;
    for (TaskId r : tdfg.blocks[b].readers)
      if (tdfg.tasks[r].kind != TaskKind::FP) backward = std::max(backward, task_arena_bytes(tdfg, r, sub_batch, 0));
    return segment + backward <= l_peak_bytes_;
  }

  // Bytes of b and of its recomputed ancestors up to the checkpoints.
  int64_t segment_bytes(const IterationSim& sim, BlockId b, int depth) const {
    const Tdfg& tdfg = sim.tdfg();
    const Block& block = tdfg.blocks[b];
    int64_t bytes = align_up(block.bytes(sim.sub_batch(sim.current_round())));
    if (depth > 16 || block.kind != BlockKind::output) return bytes;
    for (TaskId w : block.writers)
      for (BlockId x : tdfg.tasks[w].recompute_reads)
        if (x != b && !tdfg.blocks[x].resident && dropping_[x]) bytes += segment_bytes(sim, x, depth + 1);
    return bytes;
  }

  int64_t l_peak_bytes_ = 0;
  LayerId previous_layer_ = kModelInput - 1;
  std::vector<bool> dropping_;
  std::vector<bool> keep_;
};

}  // namespace

std::unique_ptr<Decider> make_superneurons_decider() { return std::make_unique<SuperNeuronsDecider>(); }

}  // namespace mplan
