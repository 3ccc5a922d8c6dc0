// Checkmate (Jain et al., MLSys 2020, §4): the schedule of recomputations
// that its MILP finds optimal for the budget (planner/checkmate_milp.h),
// played out in the simulator. The MILP's node t is the round's task at
// position t and its output the blocks that task creates; after each task
// the blocks the schedule does not keep into the next stage are dropped, and
// the simulator recomputes a dropped block, and what it needs, when a task
// reads it (the lazy R of Checkmate's solve_r). Nothing is copied to the
// host and the batch is not split. The MILP counts the outputs alone, not
// workspaces or alignment, so the policy's search (planner/plan_search.cpp)
// solves it at a few fractions of the arena and keeps the fastest plan.

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "planner/checkmate_milp.h"
#include "planner/deciders/deciders.h"

namespace mplan {
namespace {

class CheckmateDecider final : public Decider {
 public:
  CheckmateDecider(double budget_fraction, double time_limit_s, std::shared_ptr<RematSchedule> outcome)
      : fraction_(budget_fraction), time_limit_s_(time_limit_s), outcome_(std::move(outcome)) {}

  void start(IterationSim& sim) override {
    const Tdfg& tdfg = sim.tdfg();
    const int32_t n = sim.task_count();
    creator_.assign(tdfg.blocks.size(), -1);
    RematGraph graph;
    graph.compute_ms.assign(n, 0.0);
    graph.output_bytes.assign(n, 0.0);
    graph.recomputable.assign(n, false);
    double held_bytes = 0;  // the round's input data: there all the round
    for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b)
      if (sim.host_sourced(b) && !sim.uses(b).empty()) held_bytes += sim.instance_bytes(sim.instance(0, b));
    for (int32_t k = 0; k < n; ++k) {
      graph.compute_ms[k] = sim.options_of(sim.task_at(k), 0).front().time_ms;
      for (BlockId b : sim.outputs_at(k)) {
        if (creator_[b] >= 0) continue;
        creator_[b] = k;
        graph.output_bytes[k] += static_cast<double>(sim.instance_bytes(sim.instance(0, b)));
        if (sim.recomputable(b)) {
          graph.recomputable[k] = true;
          // Recomputing the block reruns every writer (an in-place ReLU over it too).
          double ms = 0;
          for (TaskId w : tdfg.blocks[b].writers) ms += sim.options_of(w, 0).front().time_ms;
          graph.compute_ms[k] = std::max(graph.compute_ms[k], ms);
        }
      }
    }
    std::set<std::pair<int32_t, int32_t>> edges;
    for (int32_t v = 0; v < n; ++v)
      for (BlockId b : sim.inputs_at(v))
        if (creator_[b] >= 0 && creator_[b] < v) edges.insert({creator_[b], v});
    graph.edges.assign(edges.begin(), edges.end());
    RematOptions options;
    options.budget_bytes = std::max(0.0, fraction_ * (static_cast<double>(sim.memory().capacity_bytes()) - held_bytes));
    options.time_limit_s = time_limit_s_;
    *outcome_ = solve_checkmate(graph, options);
    if (!outcome_->solved) throw IterationSim::Infeasible{"Checkmate's MILP: " + outcome_->why};
  }

  // Only what the schedule frees before its last use is recomputed.
  bool may_drop(const IterationSim& sim, BlockId b) override {
    const int32_t i = creator_[b];
    if (i < 0) return false;
    const int32_t last = sim.uses(b).back();
    for (int32_t t = i + 1; t <= last && t < static_cast<int32_t>(outcome_->kept.size()); ++t)
      if (!outcome_->kept[t][i]) return true;
    return false;
  }

  std::optional<int64_t> make_room(IterationSim&, const RoomRequest&) override { return std::nullopt; }

  size_t choose_option(IterationSim& sim, int32_t, int32_t, const std::vector<TaskOption>& options) override {
    return fastest_fitting_option(sim, options);
  }

  // Stage k ends: what stage k+1 does not keep leaves the device.
  void after_task(IterationSim& sim, int32_t r, int32_t k) override {
    const int32_t next = k + 1;
    if (next >= static_cast<int32_t>(outcome_->kept.size())) return;
    std::vector<int32_t> leaving;
    for (const auto& [stamp, inst] : sim.lru()) {
      if (sim.round_of(inst) != r || !sim.droppable(inst)) continue;
      const int32_t i = creator_[sim.block_of(inst)];
      if (i >= 0 && i < next && !outcome_->kept[next][i]) leaving.push_back(inst);
    }
    for (int32_t inst : leaving) sim.drop(inst);
  }

 private:
  double fraction_;
  double time_limit_s_;
  std::shared_ptr<RematSchedule> outcome_;
  std::vector<int32_t> creator_;  // per block: the position of the task that creates it, -1 if none
};

}  // namespace

std::unique_ptr<Decider> make_checkmate_decider(double budget_fraction, double time_limit_s,
                                                std::shared_ptr<RematSchedule> outcome) {
  return std::make_unique<CheckmateDecider>(budget_fraction, time_limit_s, std::move(outcome));
}

}  // namespace mplan
