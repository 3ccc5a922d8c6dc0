// `mplan compile --policy NAME` as a user runs it: an unknown name is refused
// with the list of names; a layer-wise policy (vDNN's conv/performance-optimal
// rules) writes a plan that `mplan inspect` and `mplan verify` read; the
// scheduler's flags are refused for a policy that has no such knobs.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

using CompilePolicy = MplanTest;

// A K40 plan compiled for the CPU substitutes an algorithm in most conv
// tasks (ResNet-18: dozens; ResNet-1001: 2,900). compile shows the first few
// and counts the rest; train.cpp's header lists every one.
TEST_F(CompilePolicy, ManySubstitutionsAreCountedNotAllPrinted) {
  const MplanRun r = mplan({"compile", example_model("resnet18"), "--budget", "4GiB", "--target", "cpu", "-o",
                            (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  int shown = 0;
  std::string last;
  for (size_t at = r.err.find("warning: "); at != std::string::npos; at = r.err.find("warning: ", at + 1)) {
    ++shown;
    last = r.err.substr(at, r.err.find('\n', at) - at);
  }
  const std::string program = read_file(dir_ / "out" / "train.cpp");
  int listed = 0;
  for (size_t at = program.find("// WARNING: "); at != std::string::npos; at = program.find("// WARNING: ", at + 1))
    ++listed;
  ASSERT_GT(listed, 13) << "the model no longer substitutes enough algorithms for this test";
  EXPECT_EQ(shown, 13) << r.err;
  EXPECT_NE(last.find("and " + std::to_string(listed - 12) + " more like these"), std::string::npos) << last;
}

TEST_F(CompilePolicy, UnknownPolicyFailsListingTheNames) {
  const MplanRun r =
      mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "nosuch", "-o", path("out")});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "mplan: error:")) << r.describe();
  EXPECT_TRUE(contains(r.err, "--policy 'nosuch'")) << r.describe();
  for (const char* name : {"mplan", "modnn", "vdnn-conv-p", "superneurons", "ideal"})
    EXPECT_TRUE(contains(r.err, name)) << name << "\n" << r.describe();
  EXPECT_FALSE(fs::exists(path("out/plan.json")));
}

// The lower bound (planner/lower_bound.h): printed with the plan's distance
// to it in every workspace mode (it counts micro-batched convolutions), and
// no plan is below it.
TEST_F(CompilePolicy, CompilePrintsTheLowerBoundInEveryWorkspaceMode) {
  const std::vector<std::string> modes = {"auto", "undivided", "dynamic", "wr:64KiB", "wd:auto"};
  for (size_t i = 0; i < modes.size(); ++i) {
    SCOPED_TRACE(modes[i]);
    const MplanRun c = mplan({"compile", example_model("cifar_small"), "--budget", "3MiB", "--workspace", modes[i],
                              "-o", path("out" + std::to_string(i))});
    ASSERT_EQ(c.exit_code, 0) << c.describe();
    const size_t at = c.out.find("; the plan is ");
    ASSERT_NE(at, std::string::npos) << c.describe();
    EXPECT_TRUE(contains(c.out, "lower bound: ")) << c.describe();
    const double above = std::stod(c.out.substr(at + std::string("; the plan is ").size()));
    EXPECT_GE(above, 0.0) << c.describe();
  }
}

TEST_F(CompilePolicy, VdnnConvPWritesAPlanThatInspectReads) {
  const MplanRun c = mplan(
      {"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "vdnn-conv-p", "-o", path("out")});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  EXPECT_TRUE(contains(c.out, "policy: vdnn-conv-p")) << c.describe();
  ASSERT_TRUE(fs::exists(path("out/plan.json")));
  ASSERT_TRUE(fs::exists(path("out/train.cpp")));
  const nlohmann::json plan = nlohmann::json::parse(read_file(path("out/plan.json")));
  EXPECT_EQ(plan["budget_bytes"], int64_t{64} << 20);

  const MplanRun inspect = mplan({"inspect", path("out")});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.describe();
  EXPECT_TRUE(contains(inspect.out, "cifar_small")) << inspect.describe();
  const MplanRun verify = mplan({"verify", path("out/plan.json"), "--model", example_model("cifar_small")});
  EXPECT_EQ(verify.exit_code, 0) << verify.describe();
}

TEST_F(CompilePolicy, SchedulerFlagsAreRefusedForALayerWisePolicy) {
  const MplanRun r = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "vdnn-all-m",
                            "--sub-batch", "8", "-o", path("out")});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "--sub-batch is an option of the planner")) << r.describe();
  EXPECT_FALSE(fs::exists(path("out/plan.json")));
}

TEST_F(CompilePolicy, PlannerLeversAreRefusedWhereAPolicyHasNone) {
  const MplanRun vdnn = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy",
                               "vdnn-all-m", "--no-recompute", "-o", path("v")});
  EXPECT_NE(vdnn.exit_code, 0) << vdnn.describe();
  EXPECT_TRUE(contains(vdnn.err, "--no-recompute is an option of the planner")) << vdnn.describe();
  const MplanRun modnn = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "modnn",
                                "--no-early-offload", "-o", path("m")});
  EXPECT_NE(modnn.exit_code, 0) << modnn.describe();
  EXPECT_TRUE(contains(modnn.err, "has none to turn off")) << modnn.describe();
  const MplanRun drops = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "modnn",
                                "--no-early-drops", "-o", path("d")});
  EXPECT_NE(drops.exit_code, 0) << drops.describe();
  EXPECT_TRUE(contains(drops.err, "--no-early-drops is a lever")) << drops.describe();
  const MplanRun ahead = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "modnn",
                                "--no-load-ahead", "-o", path("a")});
  EXPECT_NE(ahead.exit_code, 0) << ahead.describe();
  EXPECT_TRUE(contains(ahead.err, "--no-load-ahead is a lever")) << ahead.describe();
  const MplanRun convolutions = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy",
                                       "modnn", "--no-recompute-convolutions", "-o", path("c")});
  EXPECT_NE(convolutions.exit_code, 0) << convolutions.describe();
  EXPECT_TRUE(contains(convolutions.err, "--no-recompute-convolutions is a lever")) << convolutions.describe();
  const MplanRun bad = mplan({"compile", example_model("every_op"), "--budget", "64MiB", "--batchnorm", "sometimes",
                              "-o", path("b")});
  EXPECT_NE(bad.exit_code, 0) << bad.describe();
  EXPECT_TRUE(contains(bad.err, "--batchnorm 'sometimes': expected prefer-one, one or any")) << bad.describe();
}

// cifar_small at 3 MiB, sub-batch 7, every backward plain (K40 file): with
// early drops the plan recomputes cheap outputs and copies nothing out;
// --no-early-drops leaves only the drops an allocation asks for, and the plan
// offloads.
TEST_F(CompilePolicy, NoEarlyDropsLeavesTheDropsToWhenRoomIsNeeded) {
  auto offloads = [&](const std::string& dir, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"compile", example_model("cifar_small"), "--device", "k40", "--budget", "3MiB",
                                     "--sub-batch", "7", "--no-memory-saving-variants", "-o", path(dir)};
    args.insert(args.end(), extra.begin(), extra.end());
    const MplanRun r = mplan(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    const nlohmann::json plan = nlohmann::json::parse(read_file(path(dir + "/plan.json")));
    return plan["summary"]["offload_count"].get<int>();
  };
  EXPECT_EQ(offloads("with", {}), 0);
  EXPECT_GT(offloads("without", {"--no-early-drops"}), 0);
}

// cifar_small (batch 32) on its H200 profile in 2.8 MiB: the plan loads
// blocks ahead into free room, and --no-load-ahead leaves them to be loaded
// when their task needs them.
TEST_F(CompilePolicy, NoLoadAheadLoadsWhenTheTaskNeedsIt) {
  auto policy = [&](const std::string& dir, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"compile", example_model("cifar_small"), "--profile",
                                     std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/cifar_small-h200.json",
                                     "--budget", "2.8MiB", "--plan-only", "-o", path(dir)};
    args.insert(args.end(), extra.begin(), extra.end());
    const MplanRun r = mplan(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return r.out;
  };
  EXPECT_TRUE(contains(policy("with", {}), "loads ahead into free room"));
  EXPECT_FALSE(contains(policy("without", {"--no-load-ahead"}), "loads ahead into free room"));
}

TEST_F(CompilePolicy, BatchnormWithOneValuePerChannelIsRefusedWithTheLeastBudget) {
  // every_op's bn2 normalises a vector: at moDNN's minimum only sub-batch 1 fits.
  const MplanRun bounds = mplan({"bounds", example_model("every_op"), "--json"});
  ASSERT_EQ(bounds.exit_code, 0) << bounds.describe();
  const int64_t minimum = nlohmann::json::parse(bounds.out).at("modnn_min_bytes").get<int64_t>();
  const MplanRun r = mplan({"compile", example_model("every_op"), "--budget", std::to_string(minimum), "-o",
                            path("out")});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "fewer than two values per channel")) << r.describe();
  EXPECT_TRUE(contains(r.err, "the least budget that runs rounds of 2 samples is")) << r.describe();
  EXPECT_FALSE(fs::exists(path("out/plan.json")));
}

TEST_F(CompilePolicy, BoundsLeastBudgetIsWhatCompileAcceptsForABatchnormOnAVector) {
  // every_op's bn2 sees one value per channel and sample: rounds need 2
  // samples, so `bounds` gives Eq. 2 at sub-batch 2 beside the paper's Eq. 2
  // at sub-batch 1, and that is exactly the least budget compile accepts.
  const MplanRun bounds = mplan({"bounds", example_model("every_op"), "--json"});
  ASSERT_EQ(bounds.exit_code, 0) << bounds.describe();
  const nlohmann::json b = nlohmann::json::parse(bounds.out);
  EXPECT_EQ(b.at("least_round").get<int64_t>(), 2);
  const int64_t least = b.at("least_round_min_bytes").get<int64_t>();
  EXPECT_GT(least, b.at("modnn_min_bytes").get<int64_t>());
  const MplanRun fits = mplan({"compile", example_model("every_op"), "--budget", std::to_string(least), "-o",
                               path("fits")});
  EXPECT_EQ(fits.exit_code, 0) << fits.describe();
  const MplanRun below = mplan({"compile", example_model("every_op"), "--budget", std::to_string(least - 1), "-o",
                                path("below")});
  EXPECT_NE(below.exit_code, 0) << below.describe();
  EXPECT_TRUE(contains(below.err, "the least budget that runs rounds of 2 samples is " + std::to_string(least)))
      << below.describe();
  // Without such a batchnorm the two are one figure.
  const MplanRun nobn = mplan({"bounds", example_model("every_op_nobn"), "--json"});
  ASSERT_EQ(nobn.exit_code, 0) << nobn.describe();
  const nlohmann::json n = nlohmann::json::parse(nobn.out);
  EXPECT_EQ(n.at("least_round").get<int64_t>(), 1);
  EXPECT_EQ(n.at("least_round_min_bytes"), n.at("modnn_min_bytes"));
}

TEST_F(CompilePolicy, EveryBufferIsUsedAfterDefragmentation) {
  // The budget of docs/benchmarks-compare.md's targets: defragmentation used to leave buffers
  // allocated and freed with no step using them.
  const MplanRun r = mplan({"compile", example_model("cifar_small"), "--budget", "1788084", "--workspace", "wr:1MiB",
                            "-o", path("out")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json plan = nlohmann::json::parse(read_file(path("out/plan.json")));
  std::set<int64_t> used;
  for (const auto& step : plan.at("steps")) {
    const std::string kind = step.at("kind");
    if (kind == "offload" || kind == "prefetch") used.insert(step.at("buffer").get<int64_t>());
    for (const char* list : {"reads", "writes"})
      if (step.contains(list))
        for (const auto& b : step.at(list)) used.insert(b.get<int64_t>());
    if (step.contains("workspace")) used.insert(step.at("workspace").get<int64_t>());
  }
  for (const auto& buffer : plan.at("buffers")) {
    if (buffer.at("resident").get<bool>()) continue;
    EXPECT_TRUE(used.count(buffer.at("id").get<int64_t>())) << "buffer " << buffer.at("id") << " is never used";
  }
}

TEST_F(CompilePolicy, IdealIsRefusedUnlessItFits) {
  const MplanRun tight =
      mplan({"compile", example_model("cifar_small"), "--budget", "3MiB", "--policy", "ideal", "-o", path("t")});
  EXPECT_NE(tight.exit_code, 0) << tight.describe();
  EXPECT_TRUE(contains(tight.err, "more than the budget")) << tight.describe();
  EXPECT_FALSE(fs::exists(path("t/plan.json")));
  const MplanRun easy =
      mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--policy", "ideal", "-o", path("e")});
  EXPECT_EQ(easy.exit_code, 0) << easy.describe();
  EXPECT_TRUE(fs::exists(path("e/plan.json")));
}

}  // namespace
}  // namespace mplan::cli_test
