// The runtime's per-op-kind clock (runtime/cpu/op_profile.h) in a generated program:
// silent unless MPLAN_OP_PROFILE is set; when set, one "op-profile:" line per op
// kind that ran, with its time and calls, for every kind the model has.

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

TEST(OpProfile, GeneratedProgramReportsEachOpKindOnlyWhenAsked) {
  const Compiled compiled = compile_model(source_dir() + "/examples/models/every_op.yaml", Budget::unlimited,
                                          "op_profile_every_op");
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  const std::string log = build_program(compiled.dir);
  ASSERT_TRUE(log.empty()) << log;

  const RunResult quiet = run_program(compiled.dir, "--steps 2");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("op-profile:"), std::string::npos) << quiet.output;

  for (const char* setting : {"1", "cpu"}) {
    SCOPED_TRACE(setting);
    const RunResult profiled = run_command("MPLAN_OP_PROFILE=" + std::string(setting) + " " + compiled.dir +
                                           "/build/train --steps 2 2>&1");
    ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
    std::set<std::string> kinds;
    const std::regex line(R"(op-profile: (\w+) +([0-9.]+) ms +([0-9]+) calls)");
    for (std::sregex_iterator it(profiled.output.begin(), profiled.output.end(), line), end; it != end; ++it) {
      kinds.insert((*it)[1]);
      EXPECT_GT(std::stoll((*it)[3]), 0) << (*it)[0];
    }
    // every_op.yaml has every op; each of these kinds runs in a training step.
    // add's FP runs as add_two (counted as add), its BP1 as copy_or_add calls
    // (ops/add.cpp), counted as fill_copy.
    for (const char* kind : {"conv_forward", "conv_backward_data", "conv_backward_filter", "linear", "relu", "pool",
                             "batchnorm", "lrn", "dropout", "add", "fill_copy", "concat", "softmax_xent", "sgd"})
      EXPECT_TRUE(kinds.count(kind)) << kind << " missing from:\n" << profiled.output;
  }
}

}  // namespace
}  // namespace mplan::e2e
