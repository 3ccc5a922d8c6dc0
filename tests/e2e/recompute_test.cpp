// Plans with recomputation and in-place ReLU train the same weights as plain
// full-batch training (docs/design.md's promise). every_op has batchnorm on a
// feature map and on a vector, dropout, ReLUs computed in place over a conv's
// and a batchnorm's outputs, LRN and pooling:
//  - a plan that drops every block it may (mplan's decider, then every
//    droppable block dropped right after its last forward use) recomputes
//    the convolutions with their first run's algorithm, batchnorm from its
//    saved statistics, dropout with its mask, the in-place ReLUs, LRN and
//    pooling in the backward pass, and trains bit-identical weights;
//  - mplan's own plan at a budget where the whole batch fits as one round
//    (full-batch batchnorm statistics).
// Each is built, trained 3 steps from the same seed and data as the
// unlimited plan, and the weights compared.

#include <gtest/gtest.h>

#include <set>

#include "frontend/parse.h"
#include "planner/deciders/deciders.h"
#include "planner/sim/iteration_sim.h"
#include "planner/sub_batch.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

// Three steps from the same seed as the other plans of this file.
std::map<std::string, std::vector<float>> train(const Compiled& compiled) {
  return build_and_train(compiled, 3, 7);
}

constexpr const char* kModel = "examples/models/every_op.yaml";

TEST(Recompute, BatchnormDropoutAndInPlaceReluRecomputedTrainTheSameWeights) {
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);

  PlanResult sim = drop_everything_plan(*model, cost);
  ASSERT_TRUE(sim.feasible) << sim.note;
  Plan plan = std::move(sim.plan);
  ASSERT_TRUE(verify_plan(plan, tdfg).empty()) << to_string(verify_plan(plan, tdfg).front());
  std::set<Op> recomputed;
  for (int32_t s : sim.recompute_steps) recomputed.insert(tdfg.tasks[plan.steps[s].task].op);
  for (Op op : {Op::conv, Op::batchnorm, Op::dropout, Op::relu, Op::lrn, Op::pool})
    EXPECT_TRUE(recomputed.count(op)) << "no " << op_name(op) << " recomputed";
  bool in_place = false;
  for (int32_t s : sim.recompute_steps) in_place = in_place || tdfg.tasks[plan.steps[s].task].in_place;
  EXPECT_TRUE(in_place) << "no in-place ReLU recomputed";
  std::printf("every_op, everything dropped: %zu recompute steps\n", sim.recompute_steps.size());

  const auto unlimited = train(compile_model(kModel, Budget::unlimited, "recompute-dropped-unlimited"));
  ASSERT_FALSE(unlimited.empty());
  const auto recomputing = train(write_plan_program(*model, std::move(plan), "every_op-recompute-all"));
  ASSERT_FALSE(recomputing.empty());
  std::string worst;
  const double diff = max_relative_difference(recomputing, unlimited, &worst);
  std::printf("recomputing vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  // Bit for bit: every recomputation reruns its first run's kernel on the
  // same inputs (a convolution its algorithm, batch norm its saved
  // statistics, dropout its mask), and both plans choose the same algorithms.
  EXPECT_EQ(diff, 0) << worst;
}

TEST(Recompute, BatchnormModelAtABudgetWhereTheBatchFitsTrainsTheFullBatchWeights) {
  // every_op's whole batch fits at twice the least budget of a one-round plan:
  // mplan plans one round, so batchnorm sees the whole batch, as unlimited training does.
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok());
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);
  PlanOptions options;
  options.budget_bytes =
      resident_region_bytes(tdfg) + 2 * max_task_arena_bytes(tdfg, cost, model->batch, /*fastest=*/false);
  Result<Plan> plan = plan_iteration(tdfg, cost, options).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_EQ(plan->sub_batches.size(), 1u) << "the batch fits: one round";
  std::printf("every_op at %lld bytes: %zu round(s), %d offloads\n", static_cast<long long>(options.budget_bytes),
              plan->sub_batches.size(), plan->summary.offload_count);
  // Its own folder: ctest runs the tests of this file in parallel (-j), and a
  // shared one is rebuilt under the other test's running program.
  const auto unlimited = train(compile_model(kModel, Budget::unlimited, "recompute-one-round-unlimited"));
  ASSERT_FALSE(unlimited.empty());
  const auto fitted = train(write_plan_program(*model, std::move(*plan), "every_op-one-round"));
  ASSERT_FALSE(fitted.empty());
  std::string worst;
  const double diff = max_relative_difference(fitted, unlimited, &worst);
  std::printf("one round vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
}

}  // namespace
}  // namespace mplan::e2e
