// The vision-model ops against PyTorch: for each op
// family a small PyTorch model (tests/e2e/vision_models.py) is exported with
// tools/mplan_export.py, planned at an unlimited and at a tight budget (the
// batch split into sub-batches), compiled and trained 3 SGD steps by the
// generated CPU program from the module's own initial weights (--load); the
// same module trained by PyTorch on the same data, with gradient accumulation
// over the plan's sub-batches, must give the same losses and weights within
// 1e-4 relative (fp32). Each run prints its largest differences.

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

bool have_torchvision_tools() {
  static const bool ok = run_command("/usr/bin/python3 -c 'import torch, numpy'").exit_code == 0;
  return ok;
}

// "step 3: loss 1.662333" lines, in order.
std::vector<double> losses(const std::string& output) {
  std::vector<double> out;
  static const std::regex line(R"(step (\d+): loss ([-0-9.eE+naif]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[2]));
  return out;
}

void expect_family_agrees(const std::string& family, Budget budget) {
  if (!have_torchvision_tools()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy";
  const std::string tag = "vision-" + family + "-" + budget_name(budget);
  const std::string dir = work_dir(tag);
  const std::string script = source_dir() + "/tests/e2e/vision_models.py";
  RunResult exported = run_command("/usr/bin/python3 " + script + " export --family " + family + " --out " + dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  Compiled compiled = compile_model(dir + "/model.yaml", budget, tag + "-build");
  ASSERT_EQ(compiled.error, "");
  if (budget != Budget::unlimited) {
    ASSERT_GT(compiled.plan.sub_batches.size(), 1u) << "the tight budget must split the batch";
  }
  ASSERT_EQ(build_program(compiled.dir), "");
  RunResult run = run_program(compiled.dir, "--steps 3 --load " + dir + "/init --data " + dir + "/data --save " + dir +
                                                "/program");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string subs;
  for (int64_t n : compiled.plan.sub_batches) subs += (subs.empty() ? "" : ",") + std::to_string(n);
  RunResult torch = run_command("/usr/bin/python3 " + script + " train --family " + family + " --dir " + dir +
                                " --steps 3 --sub-batches " + subs);
  ASSERT_EQ(torch.exit_code, 0) << torch.output;

  const std::vector<double> ours = losses(run.output), theirs = losses(torch.output);
  ASSERT_EQ(ours.size(), 3u) << run.output;
  ASSERT_EQ(theirs.size(), 3u) << torch.output;
  double loss_diff = 0;
  for (size_t s = 0; s < ours.size(); ++s)
    loss_diff = std::max(loss_diff, std::fabs(ours[s] - theirs[s]) / std::max(std::fabs(theirs[s]), 1e-12));
  // Weights, biases and running statistics under mplan's names (momentum buffers aside).
  auto program = read_weights(dir + "/program");
  auto reference = read_weights(dir + "/torch");
  ASSERT_FALSE(reference.empty());
  std::map<std::string, std::vector<float>> compared;
  for (const auto& [name, values] : reference) {
    ASSERT_EQ(program.count(name), 1u) << "the program saved no " << name;
    compared[name] = program[name];
  }
  std::string worst;
  const double weight_diff = max_relative_difference(compared, reference, &worst);
  std::printf("%s at %s budget (sub-batches %s) vs PyTorch: losses max relative difference %.3g, weights %.3g at %s "
              "(%zu tensors)\n",
              family.c_str(), budget_name(budget), subs.c_str(), loss_diff, weight_diff, worst.c_str(),
              reference.size());
  EXPECT_LE(loss_diff, 1e-4);
  EXPECT_LE(weight_diff, 1e-4) << worst;
}

// Depthwise, grouped and dilated convs; hardswish, hardsigmoid, SiLU, sigmoid,
// tanh-GELU, ReLU6; squeeze-and-excitation's mul; adaptive pooling; channel
// shuffle, slices and concat.
TEST(VisionNumerics, MobileOpsUnlimited) { expect_family_agrees("mobile", Budget::unlimited); }
TEST(VisionNumerics, MobileOpsSubBatches) { expect_family_agrees("mobile", Budget::sub_batch); }
// Layer norm over channels, linear over channels, GELU, layer scale.
TEST(VisionNumerics, ConvNextOpsUnlimited) { expect_family_agrees("convnext", Budget::unlimited); }
TEST(VisionNumerics, ConvNextOpsSubBatches) { expect_family_agrees("convnext", Budget::sub_batch); }
// Patch embedding, class token, position embedding, layer norm over features,
// attention, matmul, softmax, slices of a sequence.
TEST(VisionNumerics, VitOpsUnlimited) { expect_family_agrees("vit", Budget::unlimited); }
TEST(VisionNumerics, VitOpsSubBatches) { expect_family_agrees("vit", Budget::sub_batch); }

}  // namespace
}  // namespace mplan::e2e
