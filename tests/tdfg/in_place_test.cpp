// In-place activations (tdfg/tdfg.h TdfgOptions::in_place) and the recompute
// signatures of FP tasks (Task::recompute_reads / recompute_writes): which
// layers share their input's blocks, how their tasks read and write them, and
// when sharing is refused.

#include <gtest/gtest.h>

#include "tdfg/tdfg.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

using testing::block_names;
using testing::find_block;
using testing::find_task;
using testing::LayerSpec;
using testing::make_model;
using testing::plain;
using Names = std::set<std::string>;

Model chain(std::vector<LayerSpec> middle) {
  std::vector<LayerSpec> specs{testing::conv("conv0", 2, 3, 1)};
  for (auto& spec : middle) specs.push_back(std::move(spec));
  specs.push_back(plain("flat", Op::flatten));
  specs.push_back(testing::linear("fc", 3));
  specs.push_back(plain("loss", Op::softmax_xent));
  return make_model(Shape{{1, 4, 4}}, 3, std::move(specs));
}

Tdfg checked(const Model& model, bool in_place = true) {
  Tdfg tdfg = build_tdfg(model, TdfgOptions{.in_place = in_place});
  Status status = check_tdfg(tdfg);
  EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().to_string());
  return tdfg;
}

const Task& task(const Tdfg& tdfg, const std::string& name) {
  TaskId t = find_task(tdfg, name);
  EXPECT_NE(t, kNoTask) << name;
  return tdfg.tasks.at(t);
}

TEST(InPlace, ReluAfterConvSharesItsInputsBlocks) {
  // conv0 -> r -> flat -> fc: r and flat write conv0's output block and BP1(r)
  // writes dX over dY; conv0's backward never reads its own output.
  Model model = chain({plain("r", Op::relu)});
  Tdfg tdfg = checked(model);
  const LayerId conv0 = model.find("conv0"), r = model.find("r"), flat = model.find("flat");
  EXPECT_EQ(tdfg.output_of[r], tdfg.output_of[conv0]);
  EXPECT_EQ(tdfg.output_of[flat], tdfg.output_of[conv0]);
  EXPECT_EQ(tdfg.gradient_of[r], tdfg.gradient_of[conv0]);
  EXPECT_EQ(tdfg.blocks[tdfg.output_of[r]].name, "Y[conv0+r+flat]");
  EXPECT_EQ(tdfg.blocks[tdfg.gradient_of[r]].name, "dY[conv0+r+flat]");
  const Task& fp = task(tdfg, "FP(r)");
  EXPECT_TRUE(fp.in_place);
  EXPECT_EQ(block_names(tdfg, fp.reads), Names{"Y[conv0+r+flat]"});
  EXPECT_EQ(block_names(tdfg, fp.writes), Names{"Y[conv0+r+flat]"});
  const Task& bp = task(tdfg, "BP1(r)");
  EXPECT_TRUE(bp.in_place);
  EXPECT_EQ(block_names(tdfg, bp.reads), (Names{"Y[conv0+r+flat]", "dY[conv0+r+flat]"}));
  EXPECT_EQ(block_names(tdfg, bp.writes), Names{"dY[conv0+r+flat]"});
  EXPECT_FALSE(task(tdfg, "FP(conv0)").in_place);
  // Two blocks fewer of each kind than without sharing.
  Tdfg separate = checked(model, /*in_place=*/false);
  EXPECT_EQ(separate.blocks.size(), tdfg.blocks.size() + 4);
  EXPECT_NE(separate.output_of[r], separate.output_of[conv0]);
}

TEST(InPlace, ReluAfterMaxPoolKeepsItsOwnBlock) {
  // Max-pool's backward reads its output: a ReLU over it would destroy it.
  Model model = chain({testing::pool("p", PoolMode::max, 2), plain("r", Op::relu)});
  Tdfg tdfg = checked(model);
  EXPECT_NE(tdfg.output_of[model.find("r")], tdfg.output_of[model.find("p")]);
  EXPECT_FALSE(task(tdfg, "FP(r)").in_place);
  // A flatten changes no value: it shares the ReLU's block.
  EXPECT_EQ(tdfg.output_of[model.find("flat")], tdfg.output_of[model.find("r")]);
}

TEST(InPlace, FlattenAfterMaxPoolSharesItsBlock) {
  // The pool's backward reads the shared block after the flatten "wrote" it: the same bytes.
  Model model = chain({testing::pool("p", PoolMode::max, 2)});
  Tdfg tdfg = checked(model);
  EXPECT_EQ(tdfg.output_of[model.find("flat")], tdfg.output_of[model.find("p")]);
  EXPECT_TRUE(task(tdfg, "FP(flat)").in_place);
}

TEST(InPlace, ReluAfterReluKeepsItsOwnBlock) {
  // The first ReLU's backward reads its output.
  Model model = chain({plain("r1", Op::relu), plain("r2", Op::relu)});
  Tdfg tdfg = checked(model);
  EXPECT_EQ(tdfg.output_of[model.find("r1")], tdfg.output_of[model.find("conv0")]);
  EXPECT_NE(tdfg.output_of[model.find("r2")], tdfg.output_of[model.find("r1")]);
}

// conv0 -> `name` (op) -> sum [name, conv0] -> flat -> fc: conv0 has two consumers.
Model residual(const std::string& name, Op op) {
  return make_model(Shape{{1, 4, 4}}, 3,
                    {testing::conv("conv0", 2, 3, 1), plain(name, op), plain("sum", Op::add, {name, "conv0"}),
                     plain("flat", Op::flatten), testing::linear("fc", 3), plain("loss", Op::softmax_xent)});
}

TEST(InPlace, ReluOfAnInputWithTwoConsumersKeepsItsOwnBlock) {
  // conv0 feeds r and the residual add: its gradient sums both, and add reads it after r.
  Model model = residual("r", Op::relu);
  Tdfg tdfg = checked(model);
  EXPECT_NE(tdfg.output_of[model.find("r")], tdfg.output_of[model.find("conv0")]);
  EXPECT_NE(tdfg.gradient_of[model.find("r")], tdfg.gradient_of[model.find("conv0")]);
}

TEST(InPlace, ReluAfterBatchnormSharesItsBlock) {
  // Batchnorm's backward reads its input and saved statistics, not its output.
  Model model = chain({plain("bn", Op::batchnorm), plain("r", Op::relu)});
  Tdfg tdfg = checked(model);
  EXPECT_EQ(tdfg.output_of[model.find("r")], tdfg.output_of[model.find("bn")]);
}

TEST(InPlace, BatchnormWritesItsInputGradientOverItsOwn) {
  // Batch norm's FP keeps its own output (its backward reads its input), but
  // its BP1 writes dX over dY: conv0's gradient, bn's and the ReLU's are one
  // block, read by BP2(bn) before BP1(bn) rewrites it.
  Model model = chain({plain("bn", Op::batchnorm), plain("r", Op::relu)});
  Tdfg tdfg = checked(model);
  const LayerId conv0 = model.find("conv0"), bn = model.find("bn");
  EXPECT_NE(tdfg.output_of[bn], tdfg.output_of[conv0]);
  EXPECT_EQ(tdfg.gradient_of[bn], tdfg.gradient_of[conv0]);
  EXPECT_EQ(tdfg.blocks[tdfg.gradient_of[bn]].name, "dY[conv0+bn+r+flat]");
  EXPECT_FALSE(task(tdfg, "FP(bn)").in_place);
  const Task& bp1 = task(tdfg, "BP1(bn)");
  EXPECT_TRUE(bp1.in_place);
  EXPECT_EQ(block_names(tdfg, bp1.reads), (Names{"Y[conv0]", "W[bn]", "saved[bn]", "dY[conv0+bn+r+flat]"}));
  EXPECT_EQ(block_names(tdfg, bp1.writes), Names{"dY[conv0+bn+r+flat]"});
  EXPECT_LT(find_task(tdfg, "BP2(bn)"), find_task(tdfg, "BP1(bn)"));
  // Without in-place sharing: dY[conv0] and dY[bn+...] apart.
  Tdfg separate = checked(model, /*in_place=*/false);
  EXPECT_NE(separate.gradient_of[bn], separate.gradient_of[conv0]);
  EXPECT_FALSE(separate.tasks[separate.bp1_of[bn]].in_place);
}

TEST(InPlace, BatchnormOfAnInputWithTwoConsumersKeepsItsGradient) {
  // conv0 feeds bn and the residual add: dY[conv0] sums both consumers' dX.
  Model model = residual("bn", Op::batchnorm);
  Tdfg tdfg = checked(model);
  const LayerId bn = model.find("bn");
  EXPECT_NE(tdfg.gradient_of[bn], tdfg.gradient_of[model.find("conv0")]);
  EXPECT_FALSE(tdfg.tasks[tdfg.bp1_of[bn]].in_place);
}

TEST(InPlace, AddTakesTheGradientOfItsInputWithOneConsumerAsItsOwn) {
  // conv0 -> bn -> sum [bn, conv0]: bn's output goes to the add alone, so its
  // gradient is the add's dY itself: one block, which BP1(sum) leaves as it
  // is, writing conv0's gradient beside it. The add's FP keeps its own output.
  Model model = residual("bn", Op::batchnorm);
  Tdfg tdfg = checked(model);
  const LayerId conv0 = model.find("conv0"), bn = model.find("bn"), sum = model.find("sum");
  EXPECT_EQ(tdfg.gradient_of[sum], tdfg.gradient_of[bn]);
  EXPECT_NE(tdfg.gradient_of[conv0], tdfg.gradient_of[sum]);
  EXPECT_NE(tdfg.output_of[sum], tdfg.output_of[bn]);
  EXPECT_EQ(tdfg.blocks[tdfg.gradient_of[sum]].name, "dY[bn+sum+flat]");
  EXPECT_FALSE(task(tdfg, "FP(sum)").in_place);
  const Task& bp1 = task(tdfg, "BP1(sum)");
  EXPECT_TRUE(bp1.in_place);
  EXPECT_EQ(block_names(tdfg, bp1.reads), Names{"dY[bn+sum+flat]"});
  EXPECT_EQ(block_names(tdfg, bp1.writes), (Names{"dY[bn+sum+flat]", "dY[conv0]"}));
  // The same with the inputs the other way round: the add's second input.
  Model swapped = make_model(Shape{{1, 4, 4}}, 3,
                             {testing::conv("conv0", 2, 3, 1), plain("bn", Op::batchnorm),
                              plain("sum", Op::add, {"conv0", "bn"}), plain("flat", Op::flatten),
                              testing::linear("fc", 3), plain("loss", Op::softmax_xent)});
  Tdfg other = checked(swapped);
  EXPECT_EQ(other.gradient_of[swapped.find("sum")], other.gradient_of[swapped.find("bn")]);
  EXPECT_NE(other.gradient_of[swapped.find("sum")], other.gradient_of[swapped.find("conv0")]);
  // Without in-place sharing every gradient has its block.
  Tdfg separate = checked(model, /*in_place=*/false);
  EXPECT_NE(separate.gradient_of[sum], separate.gradient_of[bn]);
  EXPECT_FALSE(separate.tasks[separate.bp1_of[sum]].in_place);
}

TEST(InPlace, AddOfInputsWithOtherConsumersKeepsItsGradient) {
  // sum [conv0, conv0] reads one tensor twice, and r's input conv0 feeds the add
  // too: no input of either add is its alone.
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {testing::conv("conv0", 2, 3, 1), plain("twice", Op::add, {"conv0", "conv0"}),
                            plain("r", Op::relu), plain("sum", Op::add, {"r", "twice"}), plain("flat", Op::flatten),
                            testing::linear("fc", 3), plain("loss", Op::softmax_xent)});
  Tdfg tdfg = checked(model);
  EXPECT_FALSE(task(tdfg, "BP1(twice)").in_place);
  EXPECT_NE(tdfg.gradient_of[model.find("twice")], tdfg.gradient_of[model.find("conv0")]);
  // r has one consumer: the second add takes its gradient.
  EXPECT_TRUE(task(tdfg, "BP1(sum)").in_place);
  EXPECT_EQ(tdfg.gradient_of[model.find("sum")], tdfg.gradient_of[model.find("r")]);
}

TEST(RecomputeSignature, ForwardTasksButTheLoss) {
  Model model = chain({plain("bn", Op::batchnorm), plain("r", Op::relu), plain("drop", Op::dropout)});
  Tdfg tdfg = checked(model);
  // Batchnorm: Y from X, W and the saved statistics; running statistics untouched.
  const Task& bn = task(tdfg, "FP(bn)");
  EXPECT_EQ(block_names(tdfg, bn.recompute_reads), (Names{"Y[conv0]", "W[bn]", "saved[bn]"}));
  EXPECT_EQ(block_names(tdfg, bn.recompute_writes), Names{"Y[bn+r]"});
  EXPECT_EQ(block_names(tdfg, bn.writes), (Names{"Y[bn+r]", "saved[bn]", "state[bn]"}));
  // In-place ReLU: rewrites the shared block.
  const Task& r = task(tdfg, "FP(r)");
  EXPECT_EQ(r.recompute_reads, r.reads);
  EXPECT_EQ(r.recompute_writes, r.writes);
  // Dropout: Y and its mask again (the mask is a function of seed, step, sample, element).
  const Task& drop = task(tdfg, "FP(drop)");
  EXPECT_EQ(block_names(tdfg, drop.recompute_reads), Names{"Y[bn+r]"});
  EXPECT_EQ(block_names(tdfg, drop.recompute_writes), (Names{"Y[drop+flat]", "saved[drop]"}));
  // Conv: as it ran (reads its weights).
  const Task& conv = task(tdfg, "FP(conv0)");
  EXPECT_EQ(conv.recompute_reads, conv.reads);
  // Never: the loss (it adds to the loss sum), backward tasks, the update.
  EXPECT_TRUE(task(tdfg, "FP(loss)").recompute_writes.empty());
  EXPECT_TRUE(task(tdfg, "BP1(bn)").recompute_writes.empty());
  EXPECT_TRUE(task(tdfg, "update").recompute_writes.empty());
}

}  // namespace
}  // namespace mplan
