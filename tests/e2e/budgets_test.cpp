// The promise (docs/design.md): the program computes the same weights as plain
// full-batch training whatever the budget. Each model is compiled at three
// budgets (e2e_util.h says how each is chosen; the test asserts that the plan
// really splits the batch or really offloads), built, trained 3 steps from the
// same seed and synthetic data, and the weights compared.

#include <gtest/gtest.h>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

constexpr int kSteps = 3;

struct Trained {
  Compiled compiled;
  std::map<std::string, std::vector<float>> weights;
};

Trained train(const std::string& model, Budget budget) {
  Trained t;
  const std::string tag = std::string(model.substr(model.rfind('/') + 1)) + "-" + budget_name(budget);
  t.compiled = compile_model(model, budget, tag);
  EXPECT_EQ(t.compiled.error, "");
  if (!t.compiled.error.empty()) return t;
  const std::string build_error = build_program(t.compiled.dir);
  EXPECT_EQ(build_error, "");
  if (!build_error.empty()) return t;
  RunResult run = run_program(t.compiled.dir, "--steps 3 --seed 7 --save " + t.compiled.dir + "/weights");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("step 3: loss"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("peak arena"), std::string::npos) << run.output;
  std::printf("[%s at %s budget] sub-batches %zu, offloads %d\n%s", model.c_str(), budget_name(budget),
              t.compiled.plan.sub_batches.size(), t.compiled.plan.summary.offload_count, run.output.c_str());
  if (run.exit_code == 0) t.weights = read_weights(t.compiled.dir + "/weights");
  return t;
}

void expect_same_weights_across_budgets(const std::string& model) {
  Trained unlimited = train(model, Budget::unlimited);
  ASSERT_FALSE(unlimited.weights.empty());
  EXPECT_EQ(unlimited.compiled.plan.sub_batches.size(), 1u);
  EXPECT_EQ(unlimited.compiled.plan.summary.offload_count, 0);

  Trained split = train(model, Budget::sub_batch);
  ASSERT_FALSE(split.weights.empty());
  EXPECT_GT(split.compiled.plan.sub_batches.size(), 1u) << "the sub-batch budget must split the batch";

  Trained offload = train(model, Budget::offload);
  ASSERT_FALSE(offload.weights.empty());
  EXPECT_GT(offload.compiled.plan.summary.offload_count, 0) << "the offload budget must offload";

  std::string worst;
  double diff = max_relative_difference(split.weights, unlimited.weights, &worst);
  std::printf("sub-batch vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
  worst.clear();
  diff = max_relative_difference(offload.weights, unlimited.weights, &worst);
  std::printf("offload vs unlimited: max relative difference %.3g at %s\n", diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
}

TEST(Budgets, CifarSmallSameWeightsAtThreeBudgets) {
  expect_same_weights_across_budgets("examples/models/cifar_small.yaml");
}

TEST(Budgets, EveryOpWithoutBatchnormSameWeightsAtThreeBudgets) {
  expect_same_weights_across_budgets("examples/models/every_op_nobn.yaml");
}

}  // namespace
}  // namespace mplan::e2e
