// The layer-wise policies' plans (planner/policy.h: vDNN's offloads,
// SuperNeurons' recomputation) run as generated programs and compute the same
// weights as plain full-batch training (docs/design.md's promise holds for every
// plan `mplan compile --policy` can write). cifar_small at the tightest budget
// SuperNeurons plans (to 4 KiB), where it recomputes; vdnn-all-m offloads the
// input of every layer at any budget. Each is built, trained 3 steps from the
// same seed and data as the unlimited run of budgets_test (same folder, so
// that build is shared) and the weights compared.

#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/parse.h"
#include "planner/policy.h"
#include "tests/planner/policy_plan.h"
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

constexpr const char* kModel = "examples/models/cifar_small.yaml";

TEST(PolicyPlans, RecomputingAndOffloadingPlansTrainTheSameWeights) {
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);

  // The tightest budget SuperNeurons plans (above the ideal's need here: its
  // first-fit placement fragments): its cache cannot keep every conv output,
  // so it recomputes.
  const int64_t budget = minimum_feasible_budget(PolicyKind::superneurons, tdfg, cost, 0, 4096);
  ASSERT_GT(budget, 0);
  PlanOptions options;
  options.budget_bytes = budget;
  PlanResult sn = testing::plan_with(PolicyKind::superneurons, tdfg, cost, options);
  ASSERT_TRUE(sn.feasible) << sn.note;
  EXPECT_GT(sn.recomputed_tasks, 0) << "superneurons must recompute at " << budget << " bytes";
  EXPECT_FALSE(sn.recompute_steps.empty()) << "the plan must hold the recomputing steps";

  // vDNN's all/memory-optimal policy: at the same budget if it fits, else at its own minimum.
  PlanResult vdnn = testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, options);
  if (!vdnn.feasible) {
    options.budget_bytes = minimum_feasible_budget(PolicyKind::vdnn_all_m, tdfg, cost, 0, 4096);
    ASSERT_GT(options.budget_bytes, 0);
    vdnn = testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, options);
  }
  ASSERT_TRUE(vdnn.feasible) << vdnn.note;
  EXPECT_FALSE(vdnn.offloaded_blocks.empty());
  EXPECT_GT(vdnn.plan.summary.offload_count, 0) << "vdnn-all-m must offload";
  std::printf("superneurons at %lld bytes: %d recomputed tasks; vdnn-all-m at %lld bytes: %d offloads\n",
              static_cast<long long>(budget), sn.recomputed_tasks, static_cast<long long>(options.budget_bytes),
              vdnn.plan.summary.offload_count);

  // Its own folder: sharing budgets_test's, which ctest may run at the same
  // time (-j), would rebuild the program under the other test's run.
  const auto unlimited = train(compile_model(kModel, Budget::unlimited, "policy-plans-unlimited"));
  ASSERT_FALSE(unlimited.empty());
  const auto recomputing = train(write_plan_program(*model, std::move(sn.plan), "cifar_small-superneurons"));
  ASSERT_FALSE(recomputing.empty());
  const auto offloading = train(write_plan_program(*model, std::move(vdnn.plan), "cifar_small-vdnn-all-m"));
  ASSERT_FALSE(offloading.empty());

  std::string worst;
  double diff = max_relative_difference(recomputing, unlimited, &worst);
  std::printf("superneurons vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
  worst.clear();
  diff = max_relative_difference(offloading, unlimited, &worst);
  std::printf("vdnn-all-m vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
}

}  // namespace
}  // namespace mplan::e2e
