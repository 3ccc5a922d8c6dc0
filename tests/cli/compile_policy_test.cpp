// `mplan compile --policy NAME` as a user runs it: an unknown name is refused
// with the list of names; a layer-wise policy (vDNN's conv/performance-optimal
// rules) writes a plan that `mplan inspect` and `mplan verify` read; the
// scheduler's flags are refused for a policy that has no such knobs.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

using CompilePolicy = MplanTest;

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
