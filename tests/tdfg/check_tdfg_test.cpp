// check_tdfg: it passes on what build_tdfg makes and names the first broken
// invariant of a damaged TDFG; tdfg_to_dot draws every task and block.

#include <gtest/gtest.h>

#include "tdfg/task_graph.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

using testing::find_block;
using testing::find_task;
using testing::make_model;
using testing::plain;

// conv0 -> r -> add [r, conv0] -> flat -> fc -> loss: a residual join.
Model residual_model() {
  return make_model(Shape{{1, 4, 4}}, 3,
                    {testing::conv("conv0", 2, 3, 1), plain("r", Op::relu),
                     plain("sum", Op::add, {"r", "conv0"}), plain("flat", Op::flatten),
                     testing::linear("fc", 3), plain("loss", Op::softmax_xent)},
                    /*batch=*/2, /*momentum=*/0.9);
}

std::string message(const Status& status) { return status.ok() ? "" : status.error().message; }

TEST(CheckTdfg, PassesOnABuiltTdfg) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  EXPECT_TRUE(check_tdfg(tdfg).ok()) << message(check_tdfg(tdfg));
}

TEST(CheckTdfg, DependencyEdgesOfTheResidualGradient) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  const BlockId grad = find_block(tdfg, "dY[conv0]");
  std::vector<TaskEdge> expected{
      {find_task(tdfg, "BP1(sum)"), find_task(tdfg, "BP1(r)"), grad},     // create, then accumulate
      {find_task(tdfg, "BP1(sum)"), find_task(tdfg, "BP2(conv0)"), grad},
      {find_task(tdfg, "BP1(r)"), find_task(tdfg, "BP2(conv0)"), grad},
  };
  std::vector<TaskEdge> got;
  for (const TaskEdge& e : dependency_edges(tdfg))
    if (e.block == grad) got.push_back(e);
  EXPECT_EQ(got, expected);
  // W[fc] is read by FP and BP1 and replaced by the update.
  const BlockId w = find_block(tdfg, "W[fc]");
  got.clear();
  for (const TaskEdge& e : dependency_edges(tdfg))
    if (e.block == w) got.push_back(e);
  EXPECT_EQ(got, (std::vector<TaskEdge>{{find_task(tdfg, "FP(fc)"), tdfg.update_task, w},
                                        {find_task(tdfg, "BP1(fc)"), tdfg.update_task, w}}));
}

TEST(CheckTdfg, DependencyEdgesOfABatchNormGradientInPlace) {
  // conv0 -> bn -> r -> flat -> fc: BP1 of flat, r and bn each rewrite the
  // one gradient block in turn; BP2(bn) reads bn's dY, so it runs after the
  // rewriters above bn and before BP1(bn); BP2(conv0) reads what BP1(bn) left.
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {testing::conv("conv0", 2, 3, 1), plain("bn", Op::batchnorm), plain("r", Op::relu),
                            plain("flat", Op::flatten), testing::linear("fc", 3), plain("loss", Op::softmax_xent)});
  Tdfg tdfg = build_tdfg(model);
  const BlockId grad = find_block(tdfg, "dY[conv0+bn+r+flat]");
  ASSERT_NE(grad, kNoBlock);
  const TaskId fc = find_task(tdfg, "BP1(fc)"), flat = find_task(tdfg, "BP1(flat)"), r = find_task(tdfg, "BP1(r)");
  const TaskId bn2 = find_task(tdfg, "BP2(bn)"), bn1 = find_task(tdfg, "BP1(bn)");
  const TaskId conv2 = find_task(tdfg, "BP2(conv0)");
  std::vector<TaskEdge> expected{{fc, flat, grad},  {fc, r, grad},     {fc, bn2, grad},    {fc, bn1, grad},
                                 {fc, conv2, grad}, {flat, r, grad},   {flat, bn2, grad},  {flat, bn1, grad},
                                 {flat, conv2, grad}, {r, bn2, grad},  {r, bn1, grad},     {r, conv2, grad},
                                 {bn2, bn1, grad},  {bn1, conv2, grad}};
  std::vector<TaskEdge> got;
  for (const TaskEdge& e : dependency_edges(tdfg))
    if (e.block == grad) got.push_back(e);
  EXPECT_EQ(got, expected);
}

TEST(CheckTdfg, FindsAReadListedOnOneSideOnly) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  tdfg.tasks[find_task(tdfg, "FP(r)")].reads.push_back(find_block(tdfg, "Y[fc]"));
  EXPECT_NE(message(check_tdfg(tdfg)).find("FP(r) reads Y[fc]"), std::string::npos)
      << message(check_tdfg(tdfg));
}

TEST(CheckTdfg, FindsAReadBeforeTheWrite) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  // FP(r) also reading Y[fc], consistently on both sides: Y[fc] is made later.
  const TaskId t = find_task(tdfg, "FP(r)");
  const BlockId b = find_block(tdfg, "Y[fc]");
  tdfg.tasks[t].reads.push_back(b);
  auto& readers = tdfg.blocks[b].readers;
  readers.insert(readers.begin(), t);
  EXPECT_NE(message(check_tdfg(tdfg)).find("Y[fc] is read by FP(r) before it is written"),
            std::string::npos)
      << message(check_tdfg(tdfg));
}

TEST(CheckTdfg, FindsAnOverwriteThatShouldAccumulate) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  const TaskId t = find_task(tdfg, "BP1(r)");
  const BlockId b = find_block(tdfg, "dY[conv0]");
  auto& reads = tdfg.tasks[t].reads;
  reads.erase(std::find(reads.begin(), reads.end(), b));
  auto& readers = tdfg.blocks[b].readers;
  readers.erase(std::find(readers.begin(), readers.end(), t));
  EXPECT_NE(message(check_tdfg(tdfg)).find("overwritten by BP1(r)"), std::string::npos)
      << message(check_tdfg(tdfg));
}

TEST(CheckTdfg, FindsAPerSampleResidentBlock) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  tdfg.blocks[find_block(tdfg, "W[conv0]")].bytes_per_sample = 4;
  EXPECT_NE(message(check_tdfg(tdfg)).find("W[conv0] is resident"), std::string::npos);
}

TEST(CheckTdfg, FindsIdsOutOfRange) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  tdfg.tasks[0].writes.push_back(static_cast<BlockId>(tdfg.blocks.size()));
  EXPECT_NE(message(check_tdfg(tdfg)).find("out of range"), std::string::npos);
}

// A hand-made TDFG listed against its dependencies: the accumulating writer
// of b0 is listed before the writer that creates it. Table:
//   task 0 "late":  reads b0, writes b0 (accumulates)
//   task 1 "early": writes b0 (creates)
//   task 2 update
// check_task_order (the Boost.Graph check) says which edge is broken.
TEST(CheckTdfg, FindsAnOrderAgainstTheDependencies) {
  Tdfg tdfg;
  tdfg.tasks = {Task{"late", TaskKind::BP1, 0, Op::relu, {0}, {0}},
                Task{"early", TaskKind::BP1, 1, Op::relu, {}, {0}},
                Task{"update", TaskKind::update, kModelInput, Op::relu, {}, {}}};
  Block b0;
  b0.name = "dY[a]";
  b0.kind = BlockKind::gradient;
  b0.bytes_per_sample = 4;
  b0.writers = {0, 1};
  b0.readers = {0};
  Block x;
  x.name = "X";
  x.kind = BlockKind::input;
  Block labels = x;
  labels.name = "labels";
  Block loss = x;
  loss.name = "loss";
  tdfg.blocks = {b0, x, labels, loss};
  tdfg.update_task = 2;
  tdfg.input_block = 1;
  tdfg.labels_block = 2;
  tdfg.loss_block = 3;
  const Status status = check_task_order(tdfg);
  EXPECT_NE(message(status).find("early must run before late"), std::string::npos)
      << message(status);
  EXPECT_FALSE(check_tdfg(tdfg).ok());
}

// A hand-made in-place rewrite of a gradient listed before a task that reads
// the gradient it overwrites. Table (layer 1 is batch norm, layer 2 above it):
//   task 0 "BP1(top)": layer 2, writes b0 (creates dY)
//   task 1 "BP1(bn)":  layer 1, in place: reads b0, writes dX over it
//   task 2 "BP2(bn)":  layer 1, reads b0 (needs dY, which task 1 overwrote)
//   task 3 update
// Without the in-place flag task 1 is an accumulating writer, and the order holds.
TEST(CheckTdfg, FindsAReadOfAGradientAfterItsInPlaceRewrite) {
  Tdfg tdfg;
  tdfg.tasks = {Task{"BP1(top)", TaskKind::BP1, 2, Op::relu, {}, {0}},
                Task{"BP1(bn)", TaskKind::BP1, 1, Op::batchnorm, {0}, {0}},
                Task{"BP2(bn)", TaskKind::BP2, 1, Op::batchnorm, {0}, {}},
                Task{"update", TaskKind::update, kModelInput, Op::relu, {}, {}}};
  tdfg.tasks[1].in_place = true;
  Block b0;
  b0.name = "dY[p+bn]";
  b0.kind = BlockKind::gradient;
  b0.bytes_per_sample = 4;
  b0.writers = {0, 1};
  b0.readers = {1, 2};
  tdfg.blocks = {b0};
  tdfg.gradient_of = {kNoBlock, 0, 0};  // dY of the batch norm and of the layer above share b0
  tdfg.update_task = 3;
  const Status status = check_task_order(tdfg);
  EXPECT_NE(message(status).find("BP2(bn) must run before BP1(bn)"), std::string::npos) << message(status);
  tdfg.tasks[1].in_place = false;
  EXPECT_TRUE(check_task_order(tdfg).ok()) << message(check_task_order(tdfg));
}

TEST(TdfgToDot, DrawsEveryTaskAndBlock) {
  Model model = residual_model();
  Tdfg tdfg = build_tdfg(model);
  const std::string dot = tdfg_to_dot(tdfg);
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  for (const Task& task : tdfg.tasks)
    EXPECT_NE(dot.find("\"" + task.name + "\""), std::string::npos) << task.name;
  for (const Block& block : tdfg.blocks)
    EXPECT_NE(dot.find("\"" + block.name + "\""), std::string::npos) << block.name;
  EXPECT_NE(dot.find("shape=box"), std::string::npos);
  // One edge per (writer, block) and (block, reader) pair.
  size_t edges = 0;
  for (size_t at = dot.find("->"); at != std::string::npos; at = dot.find("->", at + 2)) ++edges;
  size_t expected = 0;
  for (const Block& block : tdfg.blocks) expected += block.writers.size() + block.readers.size();
  EXPECT_EQ(edges, expected);
}

}  // namespace
}  // namespace mplan
