// Checkpointing every k-th layer (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost", §4), as torch.utils.checkpoint users write it: the
// forward pass keeps the outputs of every k-th layer (the checkpoints) and
// drops every other output after its last forward use; the backward pass
// recomputes a dropped output, and what it needs back to the last
// checkpoint, when a backward task reads it, and keeps it until its last
// use. Nothing is copied to the host, and the batch is not split: where the
// segments do not fit, the plan is infeasible. Each step runs the fastest
// algorithm whose workspace fits, as cudnn.benchmark picks one under a
// caching allocator.

#include <algorithm>
#include <vector>

#include "planner/deciders/deciders.h"

namespace mplan {
namespace {

class CheckpointDecider final : public Decider {
 public:
  explicit CheckpointDecider(int segment_layers) : segment_layers_(std::max(1, segment_layers)) {}

  // A block is a checkpoint when one of its writers is the last layer of a
  // segment: layers are counted in order, k to a segment.
  void start(IterationSim& sim) override {
    const Tdfg& tdfg = sim.tdfg();
    checkpoint_.assign(tdfg.blocks.size(), false);
    for (size_t b = 0; b < tdfg.blocks.size(); ++b)
      for (TaskId w : tdfg.blocks[b].writers) {
        const Task& t = tdfg.tasks[static_cast<size_t>(w)];
        if (t.kind == TaskKind::FP && (t.layer + 1) % segment_layers_ == 0) checkpoint_[b] = true;
      }
  }

  bool may_drop(const IterationSim&, BlockId b) override { return !checkpoint_[static_cast<size_t>(b)]; }

  // No eviction: checkpointing has no other lever.
  std::optional<int64_t> make_room(IterationSim&, const RoomRequest&) override { return std::nullopt; }

  size_t choose_option(IterationSim& sim, int32_t, int32_t, const std::vector<TaskOption>& options) override {
    return fastest_fitting_option(sim, options);
  }

  // After a forward task, its inputs and outputs that the forward pass needs
  // no more and that are not checkpoints leave the device.
  void after_task(IterationSim& sim, int32_t r, int32_t k) override {
    const Tdfg& tdfg = sim.tdfg();
    if (tdfg.tasks[static_cast<size_t>(sim.task_at(k))].kind != TaskKind::FP) return;
    for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
      for (BlockId b : *list) {
        const int32_t i = sim.instance(r, b);
        if (!sim.droppable(i)) continue;
        const std::vector<int32_t>& uses = sim.uses(b);
        const auto next = std::upper_bound(uses.begin(), uses.end(), k);
        if (next != uses.end() && tdfg.tasks[static_cast<size_t>(sim.task_at(*next))].kind != TaskKind::FP)
          sim.drop(i);
      }
    }
  }

 private:
  int segment_layers_;
  std::vector<bool> checkpoint_;
};

}  // namespace

std::unique_ptr<Decider> make_checkpoint_decider(int segment_layers) {
  return std::make_unique<CheckpointDecider>(segment_layers);
}

}  // namespace mplan
