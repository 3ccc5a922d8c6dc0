// A real data set trained to accuracy: scikit-learn's handwritten digits
// (tests/e2e/digits_accuracy.py: 1,437 training and 360 validation images,
// stored as uint8 NHWC) and a small CNN, trained by the generated program for
// ten epochs with SGD and a cosine schedule, reach a validation accuracy
// within one point of the same recipe in PyTorch (same module, initial
// weights, optimiser, schedule and sample order, no augmentation), at an
// unlimited budget and at budgets that force sub-batches and offloads. The
// program evaluates with its second plan, the forward pass alone
// (docs/generated-program.md, "Evaluation").

#include <gtest/gtest.h>

#include <regex>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

constexpr int kEpochs = 10;

struct Accuracy {
  double loss = -1, top1 = -1, top5 = -1;
};

// The last "val: loss L top1 T% top5 F%" line of `who`'s output ("val" or "torch val").
Accuracy parse(const std::string& output, const std::string& who) {
  const std::regex line(who + R"(: loss ([0-9.]+) top1 ([0-9.]+)% top5 ([0-9.]+)%)");
  Accuracy a;
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    a.loss = std::stod((*it)[1]);
    a.top1 = std::stod((*it)[2]);
    a.top5 = std::stod((*it)[3]);
  }
  return a;
}

std::string script() { return "/usr/bin/python3 " + source_dir() + "/tests/e2e/digits_accuracy.py"; }

// Exports the data, the model and its initial weights to a folder of the
// test's own (ctest runs each test in a process of its own), trains the
// PyTorch recipe, then compiles the program at `budget`, trains it and checks
// its last evaluation against PyTorch's.
void check(Budget budget, Compiled* compiled) {
  if (run_command("/usr/bin/python3 -c 'import torch, sklearn, numpy'").exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch, sklearn and numpy";
  const std::string tag = std::string("digits-") + budget_name(budget);
  const std::string dir = work_dir(tag + "-data");
  RunResult exported = run_command(script() + " export --out " + dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(exported.output, m, std::regex(R"(mean ([0-9.eE+-]+) std ([0-9.eE+-]+))")))
      << exported.output;
  const std::string normalisation = " --mean " + m[1].str() + " --std " + m[2].str();
  RunResult torch_run = run_command(script() + " train --dir " + dir + " --epochs " + std::to_string(kEpochs));
  ASSERT_EQ(torch_run.exit_code, 0) << torch_run.output;
  const Accuracy torch = parse(torch_run.output, "torch val");

  *compiled = compile_model(dir + "/model.yaml", budget, tag);
  ASSERT_EQ(compiled->error, "");
  ASSERT_EQ(build_program(compiled->dir), "");
  const int steps_per_epoch = 1437 / 32;
  RunResult run = run_program(compiled->dir, "--load " + dir + "/init --data " + dir + "/train --val " + dir +
                                                 "/val --epochs " + std::to_string(kEpochs) + " --eval-every " +
                                                 std::to_string(5 * steps_per_epoch) + " --lr-schedule cosine,steps=" +
                                                 std::to_string(kEpochs * steps_per_epoch) + normalisation);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Evaluated after epoch 5 and after the last.
  const std::regex val_line("\nval: ");
  EXPECT_EQ(std::distance(std::sregex_iterator(run.output.begin(), run.output.end(), val_line), std::sregex_iterator()),
            2)
      << run.output;
  EXPECT_NE(run.output.find("(360 samples after step " + std::to_string(kEpochs * steps_per_epoch)),
            std::string::npos)
      << run.output;
  const Accuracy program = parse(run.output, "val");
  std::printf("%s: program val top1 %.2f%% loss %.4f; PyTorch top1 %.2f%% loss %.4f\n", budget_name(budget),
              program.top1, program.loss, torch.top1, torch.loss);
  EXPECT_GE(torch.top1, 90.0) << "the PyTorch recipe does not learn the digits";
  EXPECT_NEAR(program.top1, torch.top1, 1.0);
  EXPECT_GE(program.top5, program.top1);
  EXPECT_NEAR(program.loss, torch.loss, 0.05);
}

TEST(DigitsAccuracy, UnlimitedBudgetReachesPyTorchsValidationAccuracy) {
  Compiled compiled;
  check(Budget::unlimited, &compiled);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_EQ(compiled.plan.sub_batches.size(), 1u);
}

TEST(DigitsAccuracy, SubBatchesReachPyTorchsValidationAccuracy) {
  Compiled compiled;
  check(Budget::sub_batch, &compiled);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_GT(compiled.plan.sub_batches.size(), 1u) << "the budget does not split the batch";
}

TEST(DigitsAccuracy, OffloadsReachPyTorchsValidationAccuracy) {
  Compiled compiled;
  check(Budget::offload, &compiled);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_GT(compiled.plan.summary.offload_count, 0) << "the budget offloads nothing";
}

}  // namespace
}  // namespace mplan::e2e
