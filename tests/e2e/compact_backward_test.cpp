// Plans whose ReLUs and max pools take their memory-saving backward
// (tdfg/compact_backward.h; a bit per element, the place of each maximum)
// train the same weights as the plain model's plan, bit for bit: the compact
// kernels route every gradient exactly as the plain ones (runtime/ops.h).
// Unlimited, at a budget that offloads within one round, and with every
// block dropped and recomputed (a recomputed compact pool writes its places
// again).

#include <gtest/gtest.h>

#include <set>

#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/sub_batch.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

// Three steps from the same seed as the other plans of this file.
std::map<std::string, std::vector<float>> train(const Compiled& compiled) {
  return build_and_train(compiled, 3, 5);
}

constexpr const char* kModel = "tests/e2e/compact_stem.yaml";

// A plan of `model` (plain or compact) at `budget` bytes, one round, verified.
// `leanest`: every convolution takes its leanest algorithm, at any budget
// (the CPU runs each algorithm family its own way, so plans whose room chose
// other algorithms would not compute the same bits).
Plan planned(const Model& model, int64_t budget, const CostModel& cost, bool leanest = false) {
  const Tdfg tdfg = build_tdfg(model);
  PlanOptions options;
  options.budget_bytes = budget;
  options.sub_batch = model.batch;
  options.select_algorithms = !leanest;
  Result<Plan> plan = plan_iteration(tdfg, cost, options).take_plan();
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().to_string());
  if (!plan.ok()) return Plan{};
  plan->compact_backward_layers = compact_backward_names(model);
  EXPECT_TRUE(verify_plan(*plan, tdfg).empty());
  return std::move(*plan);
}

TEST(CompactBackward, CompactPlansTrainThePlainWeightsBitForBit) {
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const std::vector<LayerId> layers = compact_backward_layers(*model);
  const Model compact = with_compact_backward(*model, layers);
  ASSERT_EQ(compact_backward_names(compact), (std::vector<std::string>{"relu1", "pool1", "relu2", "pool2"}));
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);

  const auto plain = train(write_plan_program(*model, planned(*model, int64_t{1} << 30, cost),
                                                        "compact-stem-plain"));
  ASSERT_FALSE(plain.empty());
  const auto unlimited = train(write_plan_program(compact, planned(compact, int64_t{1} << 30, cost),
                                                            "compact-stem-unlimited"));
  ASSERT_FALSE(unlimited.empty());
  std::string worst;
  EXPECT_EQ(max_relative_difference(unlimited, plain, &worst), 0) << worst;

  // One round in the least room its largest task needs: blocks are offloaded
  // or dropped and recomputed, the compact records with them.
  const Tdfg tdfg = build_tdfg(compact);
  const int64_t tight =
      resident_region_bytes(tdfg) + max_task_arena_bytes(tdfg, cost, compact.batch, /*fastest=*/false) + 4096;
  Plan tight_plan = planned(compact, tight, cost, /*leanest=*/true);
  ASSERT_FALSE(tight_plan.steps.empty());
  std::printf("compact_stem at %lld bytes: %d offloads, %.3f ms simulated\n", static_cast<long long>(tight),
              tight_plan.summary.offload_count, tight_plan.summary.simulated_ms);
  EXPECT_LT(tight_plan.summary.peak_arena_bytes, planned(compact, int64_t{1} << 30, cost).summary.peak_arena_bytes);
  const auto squeezed = train(write_plan_program(compact, std::move(tight_plan), "compact-stem-tight"));
  ASSERT_FALSE(squeezed.empty());
  const auto plain_leanest = train(write_plan_program(*model, planned(*model, int64_t{1} << 30, cost, /*leanest=*/true),
                                                      "compact-stem-plain-leanest"));
  ASSERT_FALSE(plain_leanest.empty());
  EXPECT_EQ(max_relative_difference(squeezed, plain_leanest, &worst), 0) << worst;

  // Every block dropped after its last forward use: the compact pools are
  // recomputed for the convolutions' weight gradients and write their places
  // again (the ReLUs' outputs are read by no backward task: nothing reruns them).
  PlanResult dropped = drop_everything_plan(compact, cost);
  ASSERT_TRUE(dropped.feasible) << dropped.note;
  ASSERT_TRUE(verify_plan(dropped.plan, tdfg).empty());
  std::set<std::string> recomputed;
  for (int32_t step : dropped.recompute_steps)
    recomputed.insert(tdfg.tasks[dropped.plan.steps[step].task].name);
  for (const char* task : {"FP(pool1)", "FP(pool2)"})
    EXPECT_TRUE(recomputed.count(task)) << task << " not recomputed";
  dropped.plan.compact_backward_layers = compact_backward_names(compact);
  const auto recomputing =
      train(write_plan_program(compact, std::move(dropped.plan), "compact-stem-dropped"));
  ASSERT_FALSE(recomputing.empty());
  EXPECT_EQ(max_relative_difference(recomputing, plain, &worst), 0) << worst;
}

}  // namespace
}  // namespace mplan::e2e
