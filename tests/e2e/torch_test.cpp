// The generated program against PyTorch (torch 1.13 under /usr/bin/python3):
// the same model, initial weights (the program's --save at step 0) and data
// (.npy files the test writes) trained 3 steps in PyTorch, with gradient
// accumulation over the plan's sub-batches, reach the same weights, momentum
// buffers and batch-norm running statistics within 1e-4 relative.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

// `flags` go to both the program and the PyTorch trainer (--clip-grad-norm);
// *output gets the program's output.
void expect_agrees_with_torch(const std::string& model, Budget budget, bool expect_split, const std::string& flags = "",
                              std::string* output = nullptr) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch, numpy and yaml";
  const std::string name = model.substr(model.rfind('/') + 1);
  // Folders of their own per flags, so that tests of one model run side by side.
  const std::string flags_tag = flags.empty() ? "" : "-" + std::to_string(std::hash<std::string>{}(flags) % 100000);
  const std::string tag = name + "-" + budget_name(budget) + flags_tag;
  Compiled compiled = compile_model(model, budget, "torch-build-" + tag);
  ASSERT_EQ(compiled.error, "");
  if (expect_split) {
    ASSERT_GT(compiled.plan.sub_batches.size(), 1u) << "the budget must split the batch";
  }
  ASSERT_EQ(build_program(compiled.dir), "");
  const std::string dir = work_dir("torch-" + tag);
  const std::string script = source_dir() + "/tests/e2e/torch_train.py";
  const std::string model_path = source_dir() + "/" + model;
  RunResult data = run_command("/usr/bin/python3 " + script + " data --model " + model_path +
                               " --samples 40 --seed 3 --out " + dir + "/data");
  ASSERT_EQ(data.exit_code, 0) << data.output;
  RunResult init = run_program(compiled.dir, "--steps 0 --seed 5 --save " + dir + "/init");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  RunResult run =
      run_program(compiled.dir, "--steps 3 --seed 5 --data " + dir + "/data --save " + dir + "/program " + flags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  if (output != nullptr) *output = run.output;
  std::printf("%s", run.output.c_str());
  std::string subs;
  for (int64_t n : compiled.plan.sub_batches) subs += (subs.empty() ? "" : ",") + std::to_string(n);
  RunResult torch = run_command("/usr/bin/python3 " + script + " train --model " + model_path + " --init " + dir +
                                "/init/latest --data " + dir + "/data --steps 3 --seed 5 --sub-batches " + subs +
                                " --out " + dir + "/torch " + flags);
  ASSERT_EQ(torch.exit_code, 0) << torch.output;
  // Weights, biases and running statistics: within 1e-4 relative per tensor
  // (the bar). Momentum buffers: relative to the largest momentum value
  // of the model, since some true gradients are exactly 0 (a bias followed by
  // batch norm: every sample shifts alike and the norm removes it) and their
  // buffers hold only rounding noise, ~1e-5.
  auto program = read_weights(dir + "/program");
  auto reference = read_weights(dir + "/torch");
  ASSERT_FALSE(reference.empty());
  std::map<std::string, std::vector<float>> program_momentum, reference_momentum;
  double largest_momentum = 0;
  for (auto* m : {&program, &reference})
    for (auto it = m->begin(); it != m->end();) {
      const auto ends = [&](const std::string& suffix) {
        return it->first.size() > suffix.size() && it->first.compare(it->first.size() - suffix.size(), suffix.size(),
                                                                      suffix) == 0;
      };
      // The optimizer's state: SGD's momentum, AdamW's moments.
      if (ends(".momentum") || ends(".exp_avg") || ends(".exp_avg_sq")) {
        (m == &program ? program_momentum : reference_momentum)[it->first] = it->second;
        if (m == &reference)
          for (float v : it->second) largest_momentum = std::max(largest_momentum, static_cast<double>(std::fabs(v)));
        it = m->erase(it);
      } else {
        ++it;
      }
    }
  std::string worst;
  double diff = max_relative_difference(program, reference, &worst);
  std::printf("%s at %s budget (sub-batches %s) vs PyTorch: weights max relative difference %.3g at %s\n",
              name.c_str(), budget_name(budget), subs.c_str(), diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
  ASSERT_EQ(program_momentum.size(), reference_momentum.size());
  double momentum_diff = 0;
  for (const auto& [key, values] : reference_momentum)
    for (size_t i = 0; i < values.size(); ++i)
      momentum_diff = std::max(momentum_diff, std::fabs(static_cast<double>(program_momentum[key].at(i)) - values[i]));
  std::printf("momentum buffers: max difference %.3g, %.3g of the largest momentum value %.3g\n", momentum_diff,
              momentum_diff / largest_momentum, largest_momentum);
  EXPECT_LE(momentum_diff, 1e-3 * largest_momentum);
}

// Every op, batch norm included, at the unlimited budget: one sub-batch.
TEST(Torch, EveryOpUnlimitedAgreesWithPyTorch) {
  expect_agrees_with_torch("examples/models/every_op.yaml", Budget::unlimited, false);
}

// Batch norm with per-sub-batch statistics, as PyTorch with gradient accumulation.
TEST(Torch, EveryOpSubBatchesAgreeWithPyTorchAccumulating) {
  expect_agrees_with_torch("examples/models/every_op.yaml", Budget::sub_batch, true);
}

// A concat of one input is a copy (torchvision's DenseNet has one).
TEST(Torch, ConcatOfOneInputUnlimitedAgreesWithPyTorch) {
  expect_agrees_with_torch("tests/e2e/concat_one.yaml", Budget::unlimited, false);
}
TEST(Torch, ConcatOfOneInputSubBatchesAgreeWithPyTorch) {
  expect_agrees_with_torch("tests/e2e/concat_one.yaml", Budget::sub_batch, true);
}

// Nesterov momentum, no weight decay on biases and batch norm, a smoothed loss.
TEST(Torch, OptimizerOptionsAgreeWithPyTorch) {
  expect_agrees_with_torch("tests/e2e/optimizer_options.yaml", Budget::unlimited, false);
}
TEST(Torch, OptimizerOptionsSubBatchesAgreeWithPyTorchAccumulating) {
  expect_agrees_with_torch("tests/e2e/optimizer_options.yaml", Budget::sub_batch, true);
}

// AdamW (its moments compared as the momentum buffers are: exp_avg and
// exp_avg_sq files), whole and over sub-batches.
TEST(Torch, AdamwAgreesWithPyTorch) {
  expect_agrees_with_torch("tests/e2e/adamw_options.yaml", Budget::unlimited, false);
}
TEST(Torch, AdamwSubBatchesAgreeWithPyTorchAccumulating) {
  expect_agrees_with_torch("tests/e2e/adamw_options.yaml", Budget::sub_batch, true);
}

// Gradients clipped by their global norm (torch.nn.utils.clip_grad_norm_),
// over sub-batches: a norm well below the gradients', so every step clips.
TEST(Torch, ClippedGradientsAgreeWithPyTorch) {
  std::string output;
  expect_agrees_with_torch("tests/e2e/optimizer_options.yaml", Budget::sub_batch, true, "--clip-grad-norm 0.05",
                           &output);
  if (output.empty()) return;  // skipped or failed above
  for (int step = 1; step <= 3; ++step) {
    const size_t at = output.find("step " + std::to_string(step) + ": loss");
    ASSERT_NE(at, std::string::npos) << output;
    EXPECT_NE(output.find("(clipped)", at), std::string::npos) << output;
  }
}

TEST(Torch, CifarSmallSubBatchesAgreeWithPyTorchAccumulating) {
  expect_agrees_with_torch("examples/models/cifar_small.yaml", Budget::sub_batch, true);
}

}  // namespace
}  // namespace mplan::e2e
