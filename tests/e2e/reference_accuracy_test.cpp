// The CPU program is the reference every backend is checked against, so its
// training step must stay as close to float64 as PyTorch fp32's does, on a
// real network and with the plan a user gets by default: ResNet-18 (64x64
// inputs, batch 4, tests/e2e/reference_accuracy.py) planned from the K40's
// analytic model, whose GPU algorithms the CPU runs as "direct", "gemm" and
// "winograd". Each parameter's update after one and two SGD steps is compared
// with float64's; the program's median and worst errors must be within twice
// PyTorch fp32's (docs/generated-program.md, "Accuracy of the CPU reference").

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

struct Errors {
  double median = 0, worst = 0;
};

// "<who>: median M worst W (name)" from the script's output.
bool parse_errors(const std::string& output, const std::string& who, Errors* errors) {
  const std::regex line(who + R"(: median ([0-9.eE+-]+) worst ([0-9.eE+-]+))");
  std::smatch m;
  if (!std::regex_search(output, m, line)) return false;
  errors->median = std::stod(m[1]);
  errors->worst = std::stod(m[2]);
  return true;
}

TEST(ReferenceAccuracy, ResNet18UpdatesFromAGpuPlanAreWithinTwicePyTorchFp32sErrors) {
  if (run_command("/usr/bin/python3 -c 'import torch, torchvision, numpy'").exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch, torchvision and numpy";
  const std::string dir = work_dir("reference-accuracy");
  const std::string script = "/usr/bin/python3 " + source_dir() + "/tests/e2e/reference_accuracy.py";
  RunResult exported = run_command(script + " export --out " + dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  Compiled compiled = compile_model(dir + "/model.yaml", Budget::unlimited, "reference-accuracy-build");
  ASSERT_EQ(compiled.error, "");
  std::ifstream source(compiled.dir + "/train.cpp");
  std::stringstream text;
  text << source.rdbuf();
  // The K40 plan runs GPU algorithms that the CPU maps to its direct loops
  // (the fallback of every algorithm too): the path whose sums this guards.
  ASSERT_NE(text.str().find("/*direct*/"), std::string::npos) << "the plan runs no direct convolution";
  ASSERT_EQ(build_program(compiled.dir), "");

  for (int steps : {1, 2}) {
    SCOPED_TRACE(std::to_string(steps) + " step(s)");
    const std::string saved = dir + "/program-" + std::to_string(steps);
    RunResult run = run_program(compiled.dir, "--steps " + std::to_string(steps) + " --load " + dir + "/init --data " +
                                                  dir + "/data --save " + saved);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    RunResult compared = run_command(script + " compare --dir " + dir + " --program " + saved + "/latest --steps " +
                                     std::to_string(steps));
    ASSERT_EQ(compared.exit_code, 0) << compared.output;
    std::printf("%s", compared.output.c_str());
    Errors torch, program;
    ASSERT_TRUE(parse_errors(compared.output, "torch fp32", &torch)) << compared.output;
    ASSERT_TRUE(parse_errors(compared.output, "program", &program)) << compared.output;
    EXPECT_LE(program.median, 2 * torch.median) << compared.output;
    EXPECT_LE(program.worst, 2 * torch.worst) << compared.output;
    EXPECT_LT(torch.median, 1e-4) << "PyTorch fp32 itself is far from float64: the comparison means nothing";
  }
}

}  // namespace
}  // namespace mplan::e2e
