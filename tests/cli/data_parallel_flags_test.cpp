// `mplan compile --gpus` and `mplan compare --gpus` as a user runs them
// (docs/multi-gpu.md): the ranks' plans are written and verify, a rank whose
// plan differs gets its own file, inspect prints every rank and the links,
// and every wrong combination of the flags is a clear usage error naming the
// flag, with nothing written.

#include <gtest/gtest.h>

#include <csignal>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace mplan::cli_test {
namespace {

class DataParallelFlags : public MplanTest {};

TEST_F(DataParallelFlags, RankPlansAreWrittenVerifiedAndInspected) {
  const std::string out = path("dp");
  // VGG-16 per GPU batch 163 on the paper's machine: vDNN must swap, and the
  // paper's staggering gives the two GPUs of a switch different layers.
  MplanRun compiled = mplan(std::vector<std::string>{
      "compile", example_model("vgg16"), "--budget", "16GiB", "--batch", "652", "--gpus", "4", "--machine",
      "p100x4-two-switches", "--policy", "vdnn-dyn", "--stagger", "paper", "--plan-only", "-o", out});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.describe();
  EXPECT_TRUE(contains(compiled.out, "ranks: 4 on p100x4-two-switches")) << compiled.out;
  EXPECT_TRUE(contains(compiled.out, "batch: 652 in all = 4 ranks x 163")) << compiled.out;
  EXPECT_TRUE(contains(compiled.out, "ranks' plans: paper, x = ")) << compiled.out;
  ASSERT_TRUE(fs::exists(fs::path(out) / "plan-rank-1.json")) << compiled.out;
  const nlohmann::json plan = nlohmann::json::parse(read_file(fs::path(out) / "plan.json"));
  EXPECT_EQ(plan["data_parallel"]["plan_of_rank"], nlohmann::json({0, 1, 0, 1}));
  EXPECT_EQ(plan["batch"], 163);
  MplanRun verified = mplan({"verify", out});
  ASSERT_EQ(verified.exit_code, 0) << verified.describe();
  EXPECT_TRUE(contains(verified.out, "plan OK (rank 0 of 4)")) << verified.out;
  EXPECT_TRUE(contains(verified.out, "plan OK (rank 1 of 4)")) << verified.out;
  MplanRun inspected = mplan({"inspect", out});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.describe();
  EXPECT_TRUE(contains(inspected.out, "plan-rank-1.json")) << inspected.out;
  EXPECT_TRUE(contains(inspected.out, "busiest links")) << inspected.out;
  EXPECT_TRUE(contains(inspected.out, "uplink")) << inspected.out;
  // The trace shows every rank and its all-reduce stream.
  const std::string trace = read_file(fs::path(out) / "trace.json");
  EXPECT_TRUE(contains(trace, "rank 3:")) << trace.substr(0, 400);
  EXPECT_TRUE(contains(trace, "all-reduce bucket 0")) << trace.substr(0, 400);
  // A rank's plan moved beside the other's is refused by verify.
  fs::copy_file(fs::path(out) / "plan.json", fs::path(out) / "plan-rank-1.json",
                fs::copy_options::overwrite_existing);
  MplanRun swapped = mplan({"verify", out});
  EXPECT_NE(swapped.exit_code, 0) << swapped.describe();
  EXPECT_TRUE(contains(swapped.err, "not rank 1's plan")) << swapped.err;
}

TEST_F(DataParallelFlags, WithoutAMachineEachGpuHasItsOwnLink) {
  const std::string out = path("dp");
  MplanRun compiled = mplan(std::vector<std::string>{
      "compile", example_model("cifar_small"), "--budget", "64MiB", "--gpus", "2",
      "--plan-only", "-o", out});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.describe();
  EXPECT_TRUE(contains(compiled.out, "each with a PCIe link of its own")) << compiled.out;
  EXPECT_TRUE(contains(compiled.out, "batch: 32 in all = 2 ranks x 16")) << compiled.out;
  MplanRun verified = mplan({"verify", out});
  EXPECT_EQ(verified.exit_code, 0) << verified.describe();
}

TEST_F(DataParallelFlags, WrongCombinationsAreUsageErrorsNamingTheFlag) {
  struct Case {
    std::vector<std::string> extra;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--gpus", "3"}, "does not divide over 3 ranks"},
      {{"--gpus", "3"}, "--batch 30 or 33"},
      {{"--gpus", "0"}, "--gpus 0"},
      {{"--gpus", "5000"}, "--gpus 5000"},
      {{"--gpus", "8", "--machine", "p100x4-two-switches"}, "has 4 GPUs"},
      {{"--machine", "no-such-machine"}, "no-such-machine"},
      {{"--gpus", "2", "--stagger", "paper"}, "--stagger paper"},
      {{"--gpus", "2", "--stagger", "sideways"}, "--stagger 'sideways'"},
      {{"--stagger", "none"}, "--stagger applies to plans of several GPUs"},
      {{"--gpus", "2", "--bucket-size", "0"}, "--bucket-size"},
      {{"--gpus", "2", "--policy", "ideal"}, "--gpus"},
  };
  for (const Case& c : cases) {
    const std::string out = path("never");
    std::vector<std::string> args = {"compile", example_model("cifar_small"), "--budget", "64MiB", "--plan-only",
                                     "-o", out};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    MplanRun r = mplan(args);
    EXPECT_NE(r.exit_code, 0) << c.says << "\n" << r.describe();
    EXPECT_NE(r.signal, SIGSEGV);
    EXPECT_TRUE(contains(r.err, c.says)) << c.says << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.says;
  }
}

TEST_F(DataParallelFlags, CompareGivesEveryPolicysJointStep) {
  MplanRun r = mplan(std::vector<std::string>{
      "compare", example_model("vgg16"), "--budget", "16GiB", "--batch", "326", "--gpus", "2",
      "--machine", "p100x4-two-switches", "--policies", "vdnn-dyn,mplan", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["batch"], 163);
  const nlohmann::json& vdnn = j["policies"][0];
  const nlohmann::json& mplan = j["policies"][1];
  // Naive vDNN swapping on both GPUs of a switch is slower than alone; the
  // paper's staggering recovers; mplan is at least as fast as both.
  EXPECT_GT(vdnn["joint_step_ms"].get<double>(), vdnn["simulated_ms"].get<double>());
  EXPECT_LT(vdnn["staggered_step_ms"].get<double>(), vdnn["joint_step_ms"].get<double>());
  EXPECT_LE(mplan["staggered_step_ms"].get<double>(), vdnn["staggered_step_ms"].get<double>());
}

}  // namespace
}  // namespace mplan::cli_test
