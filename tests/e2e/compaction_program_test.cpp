// A plan that moves blocks on the device (compaction, docs/planner.md) trains
// the same weights as the unlimited plan, bit for bit: a move copies a block
// instance between two of its buffers, and every later step reads the copy.
// The decider here moves every block it may after each task, to the top of
// the highest free range that holds it, so that the generated program runs
// many moves (reads of moved inputs, offloads and recomputations of moved
// blocks included) and the verifier checks every one.

#include <gtest/gtest.h>

#include "frontend/parse.h"
#include "planner/deciders/deciders.h"
#include "planner/sim/iteration_sim.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

constexpr const char* kModel = "examples/models/every_op.yaml";

// mplan's decider, and after every task each block on the device moved to the
// top of the highest free range that holds it.
class MoveEverything final : public Decider {
 public:
  MoveEverything() : inner_(make_modnn_decider(ModnnRules{})) {}
  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& r) override {
    return inner_->make_room(sim, r);
  }
  size_t choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& o) override {
    return inner_->choose_option(sim, r, k, o);
  }
  bool defragment_on_failure() const override { return true; }
  void after_task(IterationSim& sim, int32_t, int32_t) override {
    std::vector<int32_t> on_device;
    for (const auto& [stamp, inst] : sim.lru()) on_device.push_back(inst);
    for (int32_t inst : on_device) {
      if (sim.state(inst).buffer == kNoBuffer || !sim.state(inst).created) continue;
      const int64_t bytes = sim.reserved_bytes(sim.instance_bytes(inst));
      int64_t to = -1;
      for (const auto& [begin, seg] : sim.memory().by_address())
        if (seg.free() && seg.bytes() >= bytes) to = seg.end - bytes;
      if (to < 0) continue;
      sim.move(inst, to);
      ++moves;
    }
  }
  int moves = 0;

 private:
  std::unique_ptr<Decider> inner_;
};

TEST(CompactionProgram, BlocksMovedOnTheDeviceTrainTheSameWeights) {
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);

  MoveEverything decider;
  PlanResult sim = one_round_plan(*model, cost, decider, int64_t{1} << 30);
  ASSERT_TRUE(sim.feasible) << sim.note;
  Plan plan = std::move(sim.plan);
  ASSERT_GT(plan.summary.move_count, 20);
  EXPECT_EQ(plan.summary.move_count, decider.moves);
  const std::vector<Violation> violations = verify_plan(plan, tdfg);
  ASSERT_TRUE(violations.empty()) << to_string(violations.front());
  std::printf("every_op, every block moved after each task: %d moves (%lld bytes)\n", plan.summary.move_count,
              static_cast<long long>(plan.summary.bytes_moved));

  const auto unlimited = build_and_train(compile_model(kModel, Budget::unlimited, "compaction-unlimited"), 3, 7);
  ASSERT_FALSE(unlimited.empty());
  const auto moved = build_and_train(write_plan_program(*model, std::move(plan), "every_op-moved"), 3, 7);
  ASSERT_FALSE(moved.empty());
  std::string worst;
  EXPECT_EQ(max_relative_difference(moved, unlimited, &worst), 0) << worst;
}

}  // namespace
}  // namespace mplan::e2e
