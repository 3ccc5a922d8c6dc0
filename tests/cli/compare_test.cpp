// `mplan compare` on every example model: at 4 GiB on the K40 it exits 0, reports every policy, every
// feasible plan passes the verifier without a prefetch freed unread, and mplan is feasible and at or below
// every feasible baseline's simulated time, the baselines planned here in
// process (planner/policy.h), not read from compare's table (the deep nets: every
// policy but mplan; see kDeepNetTasks).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "driver/compare.h"
#include "frontend/parse.h"
#include "planner/policy.h"
#include "tests/planner/policy_plan.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"
#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

std::vector<std::string> example_stems() {
  std::vector<std::string> stems;
  for (const auto& entry : fs::directory_iterator(std::string(MPLAN_SOURCE_DIR) + "/examples/models"))
    if (entry.path().extension() == ".yaml") stems.push_back(entry.path().stem().string());
  std::sort(stems.begin(), stems.end());
  return stems;
}

class CompareEveryExample : public MplanTest, public ::testing::WithParamInterface<std::string> {};

// The deep nets (ResNet-1001 and -2500: thousands of tasks) take mplan's
// search minutes at 4 GiB on this machine's cores (about 0.5 s a simulation);
// their mplan plans are checked by the plan-quality goldens
// (tests/planner/plan_quality_test.cpp) and against the baselines by the
// compare bench (docs/benchmarks-compare.md), so here every other policy is
// planned and verified on them.
constexpr size_t kDeepNetTasks = 4000;

TEST_P(CompareEveryExample, EveryPolicyReportedAndMplanAtOrBelowTheBaselines) {
  Result<Model> model = load_model(example_model(GetParam()));
  ASSERT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  const bool deep = tdfg.tasks.size() > kDeepNetTasks;
  std::vector<std::string> args{"compare", example_model(GetParam()), "--budget", "4GiB", "--json"};
  std::set<std::string> expected;
  std::string listed;
  for (PolicyKind kind : all_policies()) {
    if (deep && kind == PolicyKind::mplan) continue;
    expected.insert(policy_name(kind));
    listed += (listed.empty() ? "" : ",") + std::string(policy_name(kind));
  }
  if (deep) args.insert(args.end(), {"--policies", listed});
  const MplanRun r = mplan(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json report = nlohmann::json::parse(r.out);
  std::set<std::string> seen;
  double mplan_ms = -1;
  int32_t feasible = 0;
  for (const auto& row : report.at("policies")) {
    const std::string name = row.at("policy");
    seen.insert(name);
    if (!row.at("feasible").get<bool>()) continue;
    ++feasible;
    EXPECT_EQ(row.at("violations").get<int>(), 0) << GetParam() << " " << name;
    // No policy's plan prefetches a block it frees before a read (planner/prefetch_pruning.h).
    EXPECT_EQ(row.at("prefetches_freed_unread").get<int>(), 0) << GetParam() << " " << name;
    if (name == "mplan") mplan_ms = row.at("simulated_ms").get<double>();
  }
  EXPECT_EQ(seen, expected) << GetParam();
  EXPECT_GT(feasible, 0) << GetParam() << ": no policy fits at 4 GiB\n" << r.out;
  if (deep) return;
  ASSERT_GT(mplan_ms, 0) << GetParam() << ": mplan is not feasible at 4 GiB\n" << r.out;
  // mplan's row is its own search (no baseline's plan): at or below every
  // baseline, each planned here independently of `mplan compare`.
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  PlanOptions o;
  o.budget_bytes = int64_t{4} << 30;
  for (PolicyKind kind : baseline_policies()) {
    const PlanResult baseline = testing::plan_with(kind, tdfg, cost, o);
    if (!baseline.feasible) continue;
    EXPECT_LE(mplan_ms, baseline.iteration_ms() * (1 + 1e-9)) << GetParam() << " vs " << policy_name(kind);
  }
}

// --profile: the policies priced by a recorded profile (the H200's of
// cifar_small), the device named as the profile says; --device beside it is
// refused, and a profile that does not cover the model is refused naming it.
TEST_F(MplanTest, CompareTakesARecordedProfile) {
  const std::string profile = std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/cifar_small-h200.json";
  const MplanRun r = mplan({"compare", example_model("cifar_small"), "--budget", "4MiB", "--profile", profile,
                            "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_NE(report.at("device").get<std::string>().find("measured (cuda, NVIDIA H200"), std::string::npos)
      << report.at("device");
  bool mplan_feasible = false;
  for (const auto& row : report.at("policies"))
    if (row.at("policy") == "mplan") mplan_feasible = row.at("feasible").get<bool>();
  EXPECT_TRUE(mplan_feasible) << r.out;
  const MplanRun both = mplan({"compare", example_model("cifar_small"), "--budget", "4MiB", "--profile", profile,
                               "--device", "k40"});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  EXPECT_NE(both.err.find("--device and --profile exclude each other"), std::string::npos) << both.describe();
  const MplanRun other = mplan({"compare", example_model("resnet18"), "--budget", "4GiB", "--profile", profile});
  EXPECT_EQ(other.exit_code, 1) << other.describe();
  EXPECT_NE(other.err.find(profile), std::string::npos) << other.describe();
}

// Progress: the driver announces each policy before planning it, in the
// order of the list; the command prints it only on a terminal, so a captured
// stderr holds none of it.
class CompareProgress : public MplanTest {};

TEST_F(CompareProgress, EveryPolicyIsAnnouncedInOrderAndNothingReachesAPipe) {
  driver::CompareFlags flags;
  flags.model_path = example_model("cifar_small");
  flags.budget = "4GiB";
  flags.policies = "ideal,dtr,mplan";
  Result<driver::CompareSettings> settings = driver::check_compare_flags(flags);
  ASSERT_TRUE(settings.ok()) << settings.error().to_string();
  std::vector<std::pair<PolicyKind, size_t>> announced;
  settings->on_policy = [&](PolicyKind kind, size_t index) { announced.emplace_back(kind, index); };
  Result<driver::CompareResult> result = driver::compare(*settings);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  const std::vector<std::pair<PolicyKind, size_t>> expected{
      {PolicyKind::ideal, 0}, {PolicyKind::dtr, 1}, {PolicyKind::mplan, 2}};
  EXPECT_EQ(announced, expected);
  EXPECT_EQ(result->rows.size(), 3u);
  const MplanRun r = mplan({"compare", example_model("cifar_small"), "--budget", "4GiB", "--policies", "dtr"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("planning"), std::string::npos) << r.describe();
}

INSTANTIATE_TEST_SUITE_P(Examples, CompareEveryExample, ::testing::ValuesIn(example_stems()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace mplan::cli_test
