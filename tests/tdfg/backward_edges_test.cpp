// What each task of each op reads and writes (docs/design.md, TDFG: the backward
// edges must be exact, since liveness, offloading and recomputation follow them).
//
// Most models here are  conv0 -> <op under test "t"> -> flatten -> fc -> loss,
// so that t's input (Y[conv0]) needs a gradient and t has a BP1. The TDFGs
// here are built without in-place activations, so that every layer has its
// own blocks; tests/tdfg/in_place_test.cpp covers the shared ones.

#include <gtest/gtest.h>

#include "tdfg/tdfg.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

using testing::block_names;
using testing::find_task;
using testing::LayerSpec;
using testing::make_model;
using testing::plain;
using Names = std::set<std::string>;

// conv0 [2,4,4] -> middle layers -> flatten -> fc (3 classes) -> loss.
Model sandwich(std::vector<LayerSpec> middle) {
  std::vector<LayerSpec> specs{testing::conv("conv0", 2, 3, 1)};
  for (auto& spec : middle) specs.push_back(std::move(spec));
  specs.push_back(plain("flat", Op::flatten));
  specs.push_back(testing::linear("fc", 3));
  specs.push_back(plain("loss", Op::softmax_xent));
  return make_model(Shape{{1, 4, 4}}, 3, std::move(specs));
}

struct Access {
  Names reads, writes;
};

Access access(const Tdfg& tdfg, const std::string& task) {
  TaskId t = find_task(tdfg, task);
  EXPECT_NE(t, kNoTask) << "no task " << task;
  if (t == kNoTask) return {};
  return {block_names(tdfg, tdfg.tasks[t].reads), block_names(tdfg, tdfg.tasks[t].writes)};
}

void expect_access(const Tdfg& tdfg, const std::string& task, const Names& reads,
                   const Names& writes) {
  Access got = access(tdfg, task);
  EXPECT_EQ(got.reads, reads) << task << " reads";
  EXPECT_EQ(got.writes, writes) << task << " writes";
}

Tdfg checked(const Model& model) {
  Tdfg tdfg = build_tdfg(model, TdfgOptions{.in_place = false});
  Status status = check_tdfg(tdfg);
  EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().to_string());
  return tdfg;
}

TEST(BackwardEdges, ConvBp1ReadsWeightsAndGradientBp2ReadsInputAndGradient) {
  Model model = sandwich({testing::conv("t", 2, 3, 1)});
  Tdfg tdfg = checked(model);
  expect_access(tdfg, "FP(t)", {"Y[conv0]", "W[t]"}, {"Y[t]"});
  expect_access(tdfg, "BP1(t)", {"W[t]", "dY[t]"}, {"dY[conv0]"});
  expect_access(tdfg, "BP2(t)", {"Y[conv0]", "dY[t]"}, {"dW[t]"});
  EXPECT_TRUE(tdfg.tasks[find_task(tdfg, "BP1(t)")].has_algorithms);
}

TEST(BackwardEdges, LinearLikeConv) {
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {testing::conv("conv0", 2, 3, 1), plain("flat", Op::flatten),
                            testing::linear("t", 3), plain("loss", Op::softmax_xent)});
  Tdfg tdfg = checked(model);
  expect_access(tdfg, "FP(t)", {"Y[flat]", "W[t]"}, {"Y[t]"});
  expect_access(tdfg, "BP1(t)", {"W[t]", "dY[t]"}, {"dY[flat]"});
  expect_access(tdfg, "BP2(t)", {"Y[flat]", "dY[t]"}, {"dW[t]"});
  EXPECT_FALSE(tdfg.tasks[find_task(tdfg, "BP1(t)")].has_algorithms);
}

TEST(BackwardEdges, ReluReadsItsOutput) {
  Tdfg tdfg = checked(sandwich({plain("t", Op::relu)}));
  expect_access(tdfg, "FP(t)", {"Y[conv0]"}, {"Y[t]"});
  expect_access(tdfg, "BP1(t)", {"Y[t]", "dY[t]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, MaxPoolReadsInputOutputAndGradient) {
  Tdfg tdfg = checked(sandwich({testing::pool("t", PoolMode::max, 2)}));
  expect_access(tdfg, "BP1(t)", {"Y[conv0]", "Y[t]", "dY[t]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, AvgPoolAndGlobalAvgPoolReadOnlyTheGradient) {
  Tdfg avg = checked(sandwich({testing::pool("t", PoolMode::avg, 2)}));
  expect_access(avg, "BP1(t)", {"dY[t]"}, {"dY[conv0]"});
  Tdfg global = checked(sandwich({plain("t", Op::global_avgpool)}));
  expect_access(global, "BP1(t)", {"dY[t]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, BatchnormReadsSavedStatisticsAndKeepsRunningState) {
  Tdfg tdfg = checked(sandwich({plain("t", Op::batchnorm)}));
  // FP updates the running mean and variance in state[t].
  expect_access(tdfg, "FP(t)", {"Y[conv0]", "W[t]", "state[t]"}, {"Y[t]", "saved[t]", "state[t]"});
  expect_access(tdfg, "BP1(t)", {"Y[conv0]", "W[t]", "saved[t]", "dY[t]"}, {"dY[conv0]"});
  expect_access(tdfg, "BP2(t)", {"Y[conv0]", "saved[t]", "dY[t]"}, {"dW[t]"});
  // Saved mean and inverse std: 2 channels x 2 values x 4 bytes, per sub-batch.
  const Block& saved = tdfg.blocks[tdfg.saved_of[1]];
  EXPECT_EQ(saved.bytes_per_sample, 0);
  EXPECT_EQ(saved.fixed_bytes, 2 * 2 * 4);
  EXPECT_FALSE(saved.resident);
  // Running statistics, no momentum buffer (momentum 0 in these models).
  EXPECT_EQ(tdfg.blocks[tdfg.state_of[1]].fixed_bytes, 2 * 2 * 4);
}

TEST(BackwardEdges, LrnReadsInputOutputAndGradient) {
  Tdfg tdfg = checked(sandwich({plain("t", Op::lrn)}));
  expect_access(tdfg, "BP1(t)", {"Y[conv0]", "Y[t]", "dY[t]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, DropoutReadsOnlyItsMask) {
  Tdfg tdfg = checked(sandwich({plain("t", Op::dropout)}));
  expect_access(tdfg, "FP(t)", {"Y[conv0]"}, {"Y[t]", "saved[t]"});
  expect_access(tdfg, "BP1(t)", {"saved[t]", "dY[t]"}, {"dY[conv0]"});
  // The mask: one byte per element of [2, 4, 4].
  EXPECT_EQ(tdfg.blocks[tdfg.saved_of[1]].bytes_per_sample, 32);
}

TEST(BackwardEdges, FlattenReadsOnlyTheGradient) {
  Tdfg tdfg = checked(sandwich({}));
  expect_access(tdfg, "BP1(flat)", {"dY[flat]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, ConcatReadsOnlyTheGradientAndWritesEachInput) {
  Tdfg tdfg = checked(sandwich({plain("r", Op::relu), plain("t", Op::concat, {"conv0", "r"})}));
  // Backward order: BP1(t) runs before BP1(r), so it creates both gradients.
  expect_access(tdfg, "BP1(t)", {"dY[t]"}, {"dY[conv0]", "dY[r]"});
  expect_access(tdfg, "BP1(r)", {"Y[r]", "dY[r]", "dY[conv0]"}, {"dY[conv0]"});
}

TEST(BackwardEdges, SoftmaxXentReadsProbabilitiesAndLabels) {
  const Model model = sandwich({});  // outlives the Tdfg, which points at it (ASan: stack-use-after-scope)
  Tdfg tdfg = checked(model);
  expect_access(tdfg, "FP(loss)", {"Y[fc]", "labels"}, {"Y[loss]", "loss"});
  expect_access(tdfg, "BP1(loss)", {"Y[loss]", "labels"}, {"dY[fc]"});
  EXPECT_EQ(tdfg.gradient_of[tdfg.model->layers.size() - 1], kNoBlock) << "the loss has no dY";
  EXPECT_EQ(tdfg.blocks[tdfg.loss_block].fixed_bytes, 4);
}

// Residual join: Y[conv0] feeds both r and the add, so dY[conv0] has two
// writers. Backward order is BP1(t), BP1(r): BP1(t) creates dY[conv0], BP1(r)
// accumulates into it (reads and writes it).
TEST(BackwardEdges, ResidualJoinAccumulatesTheGradient) {
  Tdfg tdfg = checked(sandwich({plain("r", Op::relu), plain("t", Op::add, {"r", "conv0"})}));
  expect_access(tdfg, "BP1(t)", {"dY[t]"}, {"dY[r]", "dY[conv0]"});
  expect_access(tdfg, "BP1(r)", {"Y[r]", "dY[r]", "dY[conv0]"}, {"dY[conv0]"});
  const Block& grad = tdfg.blocks[tdfg.gradient_of[0]];
  ASSERT_EQ(grad.writers.size(), 2u);
  EXPECT_EQ(tdfg.tasks[grad.writers[0]].name, "BP1(t)");
  EXPECT_EQ(tdfg.tasks[grad.writers[1]].name, "BP1(r)");
  // Readers in execution order: the accumulating BP1(r), then BP2(conv0).
  ASSERT_EQ(grad.readers.size(), 2u);
  EXPECT_EQ(tdfg.tasks[grad.readers[0]].name, "BP1(r)");
  EXPECT_EQ(tdfg.tasks[grad.readers[1]].name, "BP2(conv0)");
}

TEST(BackwardEdges, AddOfTheSameInputTwiceWritesItsGradientOnce) {
  Tdfg tdfg = checked(sandwich({plain("t", Op::add, {"conv0", "conv0"})}));
  expect_access(tdfg, "BP1(t)", {"dY[t]"}, {"dY[conv0]"});
  EXPECT_EQ(tdfg.blocks[tdfg.gradient_of[0]].writers.size(), 1u);
}

TEST(BackwardEdges, FirstLayerHasNoBp1) {
  Tdfg tdfg = checked(sandwich({}));
  EXPECT_EQ(tdfg.bp1_of[0], kNoTask);
  EXPECT_NE(tdfg.bp2_of[0], kNoTask);
  EXPECT_EQ(find_task(tdfg, "BP1(conv0)"), kNoTask);
}

// input -> relu0 -> conv1 -> ...: nothing before conv1 has parameters, so
// neither relu0 nor conv1 has a BP1 and relu0's output has no gradient.
TEST(BackwardEdges, NoGradientBeforeTheFirstWeightedLayer) {
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {plain("relu0", Op::relu), testing::conv("conv1", 2, 3, 1),
                            plain("flat", Op::flatten), testing::linear("fc", 3),
                            plain("loss", Op::softmax_xent)});
  Tdfg tdfg = checked(model);
  EXPECT_EQ(tdfg.bp1_of[0], kNoTask);
  EXPECT_EQ(tdfg.bp2_of[0], kNoTask);
  EXPECT_EQ(tdfg.gradient_of[0], kNoBlock);
  EXPECT_EQ(tdfg.bp1_of[1], kNoTask);
  EXPECT_NE(tdfg.bp2_of[1], kNoTask);
  expect_access(tdfg, "BP2(conv1)", {"Y[relu0]", "dY[conv1]"}, {"dW[conv1]"});
}

TEST(BackwardEdges, OnlyLayersWithParametersHaveBp2) {
  Model model = sandwich({plain("bn", Op::batchnorm), plain("r", Op::relu),
                          testing::pool("p", PoolMode::max, 2), plain("d", Op::dropout),
                          plain("n", Op::lrn)});
  Tdfg tdfg = checked(model);
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const bool weighted = model.parameter_count(l) > 0;
    EXPECT_EQ(tdfg.bp2_of[l] != kNoTask, weighted) << model.layers[l].name;
    EXPECT_EQ(tdfg.weight_of[l] != kNoBlock, weighted) << model.layers[l].name;
    EXPECT_EQ(tdfg.weight_grad_of[l] != kNoBlock, weighted) << model.layers[l].name;
  }
}

// Execution order: FP in layer order, then BP2 before BP1 in reverse layer
// order, then the update.
TEST(TaskOrder, ForwardThenReverseBackwardThenUpdate) {
  Tdfg tdfg = checked(sandwich({plain("r", Op::relu)}));
  std::vector<std::string> names;
  for (const Task& task : tdfg.tasks) names.push_back(task.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "FP(conv0)", "FP(r)", "FP(flat)", "FP(fc)", "FP(loss)", "BP1(loss)",
                       "BP2(fc)", "BP1(fc)", "BP1(flat)", "BP1(r)", "BP2(conv0)", "update"}));
  EXPECT_EQ(tdfg.update_task, static_cast<TaskId>(names.size()) - 1);
}

TEST(TaskOrder, UpdateReadsEveryWeightGradientAndStateAndWritesWeightsAndState) {
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {testing::conv("conv0", 2, 3, 1), plain("bn", Op::batchnorm),
                            plain("flat", Op::flatten), testing::linear("fc", 3),
                            plain("loss", Op::softmax_xent)},
                           /*batch=*/2, /*momentum=*/0.9);
  Tdfg tdfg = checked(model);
  expect_access(tdfg, "update",
                {"W[conv0]", "dW[conv0]", "state[conv0]", "W[bn]", "dW[bn]", "state[bn]", "W[fc]",
                 "dW[fc]", "state[fc]"},
                {"W[conv0]", "state[conv0]", "W[bn]", "state[bn]", "W[fc]", "state[fc]"});
  // Momentum buffer (params) for conv0; momentum buffer + running stats for bn.
  const int64_t conv0_params = 2 * 1 * 9 + 2;
  EXPECT_EQ(tdfg.blocks[tdfg.state_of[0]].fixed_bytes, conv0_params * 4);
  EXPECT_EQ(tdfg.blocks[tdfg.state_of[1]].fixed_bytes, (2 * 2 + 2 * 2) * 4);
  // AdamW keeps two moments per parameter, resident like the momentum buffer.
  model.optimizer.kind = "adamw";
  const Tdfg adamw = checked(model);
  EXPECT_EQ(adamw.blocks[adamw.state_of[0]].fixed_bytes, 2 * conv0_params * 4);
  EXPECT_EQ(adamw.blocks[adamw.state_of[1]].fixed_bytes, (2 * 2 * 2 + 2 * 2) * 4);
  EXPECT_EQ(adamw.resident_bytes(), tdfg.resident_bytes() + model.parameter_count() * 4);
}

}  // namespace
}  // namespace mplan
