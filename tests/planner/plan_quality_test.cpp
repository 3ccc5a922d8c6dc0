// Plan-quality goldens: per example model and budget on the K40's analytic
// cost model, mplan's simulated time and bytes moved each way, held to ±1%
// of tests/planner/goldens/plan_quality.json. A change that makes plans
// slower (or faster) shows up here; the goldens are regenerated only on
// purpose, with one command (after checking the change is meant):
//
//   MPLAN_REGENERATE_GOLDENS=1 build/tests/planner/planner_tests --gtest_filter='PlanQuality.*'
//
// The analytic cost model (profiler/) sets every figure: when it is
// re-fitted, regenerate and say so in the commit.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"

namespace mplan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Case {
  const char* model;
  int64_t batch;  // 0: the model's
  int64_t budget_bytes;
};

// Every example model, at budgets from roomy to tight (planning them all takes about 10 s).
const Case kCases[] = {
    {"cifar_small", 0, 3 * kMiB},      {"cifar_small", 0, 64 * kMiB},   {"every_op_nobn", 0, 2 * kMiB},
    {"every_op", 0, 1 * kMiB},         {"alexnet", 0, 1024 * kMiB},     {"resnet18", 0, 1024 * kMiB},
    {"resnet18", 0, 4096 * kMiB},      {"resnet34", 0, 4096 * kMiB},    {"googlenet", 0, 2048 * kMiB},
    {"vgg16", 64, 2048 * kMiB},        {"vgg19", 64, 2048 * kMiB},      {"resnet50", 0, 4096 * kMiB},
    {"resnet50", 0, 2048 * kMiB},      {"densenet121", 0, 2048 * kMiB}, {"resnet101", 0, 4096 * kMiB},
    {"resnet152", 0, 4096 * kMiB},     {"resnet1001", 0, 2048 * kMiB},  {"resnet2500", 0, 4096 * kMiB},
};

std::string golden_path() { return std::string(MPLAN_SOURCE_DIR) + "/tests/planner/goldens/plan_quality.json"; }

std::string key_of(const Case& c) {
  return std::string(c.model) + (c.batch > 0 ? " batch " + std::to_string(c.batch) : std::string()) + " at " +
         std::to_string(c.budget_bytes) + " bytes";
}

nlohmann::json plan_figures(const Case& c) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + c.model + ".yaml");
  EXPECT_TRUE(model.ok());
  if (c.batch > 0) model->batch = c.batch;
  const Tdfg tdfg = build_tdfg(*model);
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  PlanOptions o;
  o.budget_bytes = c.budget_bytes;
  Result<Plan> plan = plan_iteration(tdfg, cost, o).take_plan();
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().to_string());
  if (!plan.ok()) return {};
  EXPECT_TRUE(verify_plan(*plan, tdfg).empty());
  return {{"simulated_ms", plan->summary.simulated_ms},
          {"bytes_to_host", plan->summary.bytes_to_host},
          {"bytes_to_device", plan->summary.bytes_to_device},
          {"sub_batch", plan->sub_batch},
          {"rounds", plan->sub_batches.size()}};
}

// Within ±1% (and 64 KiB for byte counts near 0).
void expect_near(const std::string& what, double got, double want, double floor) {
  EXPECT_LE(std::fabs(got - want), std::max(0.01 * std::fabs(want), floor))
      << what << ": " << got << ", golden " << want << " (regenerate only on purpose, see the file's header)";
}

TEST(PlanQuality, SimulatedTimeAndBytesMovedMatchTheGoldens) {
  if (std::getenv("MPLAN_REGENERATE_GOLDENS") != nullptr) {
    nlohmann::json out = nlohmann::json::object();
    for (const Case& c : kCases) out[key_of(c)] = plan_figures(c);
    std::ofstream(golden_path()) << out.dump(2) << "\n";
    GTEST_SKIP() << "regenerated " << golden_path();
  }
  std::ifstream in(golden_path());
  ASSERT_TRUE(in.good()) << "missing " << golden_path();
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const Case& c : kCases) {
    const std::string key = key_of(c);
    SCOPED_TRACE(key);
    ASSERT_TRUE(golden.contains(key)) << "no golden for " << key << ": regenerate";
    const nlohmann::json got = plan_figures(c);
    const nlohmann::json& want = golden.at(key);
    expect_near("simulated ms", got.at("simulated_ms").get<double>(), want.at("simulated_ms").get<double>(), 0);
    expect_near("bytes to host", got.at("bytes_to_host").get<double>(), want.at("bytes_to_host").get<double>(),
                64 * 1024);
    expect_near("bytes to device", got.at("bytes_to_device").get<double>(),
                want.at("bytes_to_device").get<double>(), 64 * 1024);
  }
}

}  // namespace
}  // namespace mplan
