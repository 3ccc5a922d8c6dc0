// The evaluation graph (tdfg/tdfg.h TdfgOptions::evaluation): the forward
// pass alone, batch norm reading its running statistics and saving nothing,
// dropout saving no mask, the loss writing its four metrics, ReLUs in place
// wherever their input has one reader, and the training graph's resident
// blocks in the same order and sizes (so both plans place the weights alike).

#include <gtest/gtest.h>

#include "tdfg/tdfg.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

using testing::block_names;
using testing::find_block;
using testing::find_task;
using testing::make_model;
using testing::plain;
using Names = std::set<std::string>;

// conv0 -> bn -> r -> drop -> flat -> fc -> loss, with momentum (SGD state).
Model model_with_batchnorm_and_dropout() {
  return make_model(Shape{{1, 4, 4}}, 3,
                    {testing::conv("conv0", 2, 3, 1), plain("bn", Op::batchnorm), plain("r", Op::relu),
                     plain("drop", Op::dropout), plain("flat", Op::flatten), testing::linear("fc", 3),
                     plain("loss", Op::softmax_xent)},
                    /*batch=*/4, /*momentum=*/0.9);
}

TEST(EvaluationTdfg, HasTheForwardPassAloneAndPassesTheChecks) {
  const Model model = model_with_batchnorm_and_dropout();
  const Tdfg tdfg = build_evaluation_tdfg(model);
  Status status = check_tdfg(tdfg);
  ASSERT_TRUE(status.ok()) << status.error().to_string();
  EXPECT_TRUE(tdfg.evaluation);
  EXPECT_EQ(tdfg.update_task, kNoTask);
  ASSERT_EQ(tdfg.tasks.size(), model.layers.size());
  for (const Task& t : tdfg.tasks) {
    EXPECT_EQ(t.kind, TaskKind::FP) << t.name;
    EXPECT_FALSE(t.batch_statistics) << t.name << ": the running statistics allow any round";
    EXPECT_TRUE(t.recompute_reads.empty()) << t.name << ": nothing is recomputed";
  }
  for (const Block& b : tdfg.blocks) {
    EXPECT_NE(b.kind, BlockKind::gradient) << b.name;
    EXPECT_NE(b.kind, BlockKind::saved) << b.name << ": batch norm and dropout save nothing";
  }
  EXPECT_EQ(tdfg.blocks[tdfg.loss_block].bytes(4), kEvaluationMetricsBytes);
}

TEST(EvaluationTdfg, BatchNormReadsItsRunningStatisticsWithoutWritingThem) {
  const Model model = model_with_batchnorm_and_dropout();
  const Tdfg tdfg = build_evaluation_tdfg(model);
  const Task& bn = tdfg.tasks.at(find_task(tdfg, "FP(bn)"));
  EXPECT_EQ(block_names(tdfg, bn.reads), (Names{"Y[conv0]", "W[bn]", "state[bn]"}));
  EXPECT_EQ(block_names(tdfg, bn.writes), (Names{"Y[bn+r]"}));
  // Training: the statistics are written, and the mean and inverse std saved.
  const Tdfg training = build_tdfg(model);
  const Task& train_bn = training.tasks.at(find_task(training, "FP(bn)"));
  EXPECT_EQ(block_names(training, train_bn.writes), (Names{"Y[bn+r]", "state[bn]", "saved[bn]"}));
}

TEST(EvaluationTdfg, AReluAfterAReluIsInPlaceOnlyInEvaluation) {
  // Training: r2 would overwrite r's output, which BP1(r) reads; evaluation
  // has no backward pass, so every ReLU with a single reader of its input
  // runs in place.
  const Model model = make_model(Shape{{1, 4, 4}}, 3,
                                 {testing::conv("conv0", 2, 3, 1), plain("r", Op::relu), plain("r2", Op::relu),
                                  plain("flat", Op::flatten), testing::linear("fc", 3),
                                  plain("loss", Op::softmax_xent)});
  const Tdfg training = build_tdfg(model), evaluation = build_evaluation_tdfg(model);
  EXPECT_NE(find_block(training, "Y[conv0+r]"), kNoBlock);
  EXPECT_NE(find_block(training, "Y[r2+flat]"), kNoBlock);
  EXPECT_NE(find_block(evaluation, "Y[conv0+r+r2+flat]"), kNoBlock);
  EXPECT_TRUE(evaluation.tasks.at(find_task(evaluation, "FP(r2)")).in_place);
}

TEST(EvaluationTdfg, ResidentBlocksAreTheTrainingGraphsInOrderAndSize) {
  const Model model = model_with_batchnorm_and_dropout();
  const Tdfg training = build_tdfg(model), evaluation = build_evaluation_tdfg(model);
  std::vector<std::pair<std::string, int64_t>> a, b;
  for (const Block& block : training.blocks)
    if (block.resident) a.emplace_back(block.name, block.bytes(0));
  for (const Block& block : evaluation.blocks)
    if (block.resident) b.emplace_back(block.name, block.bytes(0));
  EXPECT_EQ(a, b);
  EXPECT_EQ(training.resident_bytes(), evaluation.resident_bytes());
  // Weight gradients are there (the same region), read and written by nobody.
  const BlockId dw = find_block(evaluation, "dW[fc]");
  ASSERT_NE(dw, kNoBlock);
  EXPECT_TRUE(evaluation.blocks[dw].readers.empty());
  EXPECT_TRUE(evaluation.blocks[dw].writers.empty());
}

}  // namespace
}  // namespace mplan
