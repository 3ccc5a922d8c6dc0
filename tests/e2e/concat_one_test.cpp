// A concat of one input is the identity, through the whole
// pipeline: torchvision's DenseNet concatenates a list one tensor long at the
// first layer of each dense block, and ONNX's Concat takes one or more
// inputs. The same network with and without such a concat, compiled at two
// budgets, built on the CPU backend and trained 3 steps from the same seed,
// reaches the same weights (the concat has none, so the initialisation is
// the same tensor for tensor).

#include <gtest/gtest.h>

#include <fstream>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

std::string model_text(bool with_identity_concat) {
  return std::string("name: concat_one\ninput: [3, 8, 8]\nbatch: 8\nclasses: 10\nlayers:\n") +
         "  - {name: c1, op: conv, out: 4, kernel: 3, pad: 1}\n"
         "  - {name: r1, op: relu}\n" +
         (with_identity_concat ? "  - {name: dense_in, op: concat, in: [r1]}\n" : "") +
         "  - {name: c2, op: conv, out: 4, kernel: 3, pad: 1}\n"
         "  - {name: r2, op: relu}\n"
         "  - {name: join, op: concat, in: [r2, r1]}\n"
         "  - {name: p1, op: pool, mode: max, kernel: 2}\n"
         "  - {name: f, op: flatten}\n"
         "  - {name: fc, op: linear, out: 10}\n"
         "  - {name: loss, op: softmax_xent}\n";
}

std::map<std::string, std::vector<float>> trained(bool with_identity_concat, Budget budget) {
  const std::string tag = std::string("concat-one-") + (with_identity_concat ? "with-" : "without-") + budget_name(budget);
  const std::string dir = work_dir(tag + "-model");
  const std::string path = dir + "/model.yaml";
  std::ofstream(path) << model_text(with_identity_concat);
  Compiled compiled = compile_model(path, budget, tag);
  EXPECT_EQ(compiled.error, "");
  if (!compiled.error.empty()) return {};
  if (budget == Budget::sub_batch) {
    EXPECT_GT(compiled.plan.sub_batches.size(), 1u);
  }
  const std::string build_error = build_program(compiled.dir);
  EXPECT_EQ(build_error, "");
  if (!build_error.empty()) return {};
  RunResult run = run_program(compiled.dir, "--steps 3 --seed 11 --save " + compiled.dir + "/weights");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (run.exit_code != 0) return {};
  return read_weights(compiled.dir + "/weights");
}

TEST(ConcatOfOne, TrainsExactlyAsTheNetworkWithoutIt) {
  const auto reference = trained(false, Budget::unlimited);
  ASSERT_FALSE(reference.empty());
  for (Budget budget : {Budget::unlimited, Budget::sub_batch}) {
    const auto with = trained(true, budget);
    ASSERT_FALSE(with.empty());
    std::string worst;
    const double diff = max_relative_difference(with, reference, &worst);
    std::printf("concat of one input at the %s budget vs the network without it: max relative difference %.3g at %s\n",
                budget_name(budget), diff, worst.c_str());
    EXPECT_LE(diff, 1e-5) << worst;
  }
}

}  // namespace
}  // namespace mplan::e2e
