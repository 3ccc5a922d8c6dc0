// Which layers take their memory-saving backward (tdfg/compact_backward.h),
// one table-built model per decision: taken where it frees a tensor of the
// backward pass, refused where another backward task reads that tensor
// anyway, and the TDFG of a compact layer (its BP1 reads the record and dY
// only, its FP writes the record).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/parse.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

Model parsed(const std::string& layers) {
  const std::string text = "name: t\ninput: [3, 16, 16]\nbatch: 4\nclasses: 10\nlayers:\n" + layers +
                           "  - {name: flat, op: flatten}\n  - {name: fc, op: linear, out: 10}\n"
                           "  - {name: loss, op: softmax_xent}\n";
  Result<Model> model = parse_model(text, "t.yaml");
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  return model.ok() ? *model : Model{};
}

std::vector<std::string> chosen(const Model& model) {
  return compact_backward_names(with_compact_backward(model, compact_backward_layers(model)));
}

using Names = std::vector<std::string>;

TEST(CompactBackward, AReluBeforeAMaxPoolAndThePoolBothTakeIt) {
  // ResNet's stem: the ReLU's output is read backward only by its own BP1
  // and the pool's; both compact, neither is kept.
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: bn1, op: batchnorm}\n"
      "  - {name: relu1, op: relu}\n"
      "  - {name: pool1, op: pool, mode: max, kernel: 3, stride: 2, pad: 1}\n"
      "  - {name: conv2, op: conv, out: 8, kernel: 3, pad: 1}\n");
  EXPECT_EQ(chosen(model), (Names{"relu1", "pool1"}));
}

TEST(CompactBackward, AReluWhoseOutputAConvolutionReadsBackwardIsRefused) {
  // conv2's weight gradient reads relu1's output: the mask would be kept beside it.
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: relu1, op: relu}\n"
      "  - {name: conv2, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: relu2, op: relu}\n");
  // relu2's output is the flatten's (a view), which fc's weight gradient reads.
  EXPECT_EQ(chosen(model), Names{});
}

TEST(CompactBackward, AMaxPoolWhoseInputAndOutputAreReadBackwardAnywayIsRefused) {
  // relu1 feeds the pool and conv2 (conv2's BP2 reads it), and conv3's BP2
  // reads the pool's output: the places would free nothing.
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: relu1, op: relu}\n"
      "  - {name: pool1, op: pool, mode: max, kernel: 2, stride: 2}\n"
      "  - {name: conv3, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: conv2, op: conv, in: relu1, out: 8, kernel: 3, stride: 2, pad: 1}\n"
      "  - {name: sum, op: add, in: [conv3, conv2]}\n");
  EXPECT_EQ(chosen(model), Names{});
}

TEST(CompactBackward, ThePoolTakesItWhenItFreesItsInputAlone) {
  // The pool's output is kept for conv2's weight gradient, but its input (a
  // convolution's output, read backward by nobody else) is freed.
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: pool1, op: pool, mode: max, kernel: 2, stride: 2}\n"
      "  - {name: conv2, op: conv, out: 8, kernel: 3, pad: 1}\n");
  EXPECT_EQ(chosen(model), (Names{"pool1"}));
}

TEST(CompactBackward, AveragePoolsAndWindowsOfMoreThan255ElementsHaveNoCompactForm) {
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: avg, op: pool, mode: avg, kernel: 2, stride: 1}\n"
      "  - {name: big, op: pool, mode: max, kernel: 16, stride: 1, pad: 1}\n");
  EXPECT_EQ(chosen(model), Names{});
  Result<Model> forced = with_compact_backward(model, Names{"big"});
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.error().message.find("'big'"), std::string::npos) << forced.error().message;
  Result<Model> unknown = with_compact_backward(model, Names{"nope"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'nope'"), std::string::npos) << unknown.error().message;
}

TEST(CompactBackward, TheCompactTasksReadTheRecordInsteadOfTheTensors) {
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: bn1, op: batchnorm}\n"
      "  - {name: relu1, op: relu}\n"
      "  - {name: pool1, op: pool, mode: max, kernel: 3, stride: 2, pad: 1}\n"
      "  - {name: conv2, op: conv, out: 8, kernel: 3, pad: 1}\n");
  Result<Model> compact = with_compact_backward(model, Names{"relu1", "pool1"});
  ASSERT_TRUE(compact.ok());
  const Tdfg tdfg = build_tdfg(*compact);
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  const LayerId relu = compact->find("relu1"), pool = compact->find("pool1");
  const BlockId mask = tdfg.saved_of[relu], places = tdfg.saved_of[pool];
  ASSERT_NE(mask, kNoBlock);
  ASSERT_NE(places, kNoBlock);
  EXPECT_EQ(tdfg.blocks[mask].bytes_per_sample, (8 * 16 * 16 + 7) / 8);  // a bit per element
  EXPECT_EQ(tdfg.blocks[places].bytes_per_sample, 8 * 8 * 8);          // a byte per output
  // The ReLU is still computed in place over batch norm's output.
  EXPECT_TRUE(tdfg.tasks[tdfg.fp_of[relu]].in_place);
  auto reads = [](const Tdfg& g, TaskId t) {
    std::vector<std::string> names;
    for (BlockId b : g.tasks[t].reads) names.push_back(g.blocks[b].name);
    return names;
  };
  EXPECT_EQ(reads(tdfg, tdfg.bp1_of[relu]), (Names{"saved[relu1]", "dY[conv1+bn1+relu1]"}));
  EXPECT_EQ(reads(tdfg, tdfg.bp1_of[pool]), (Names{"saved[pool1]", "dY[pool1]"}));
  // No backward task reads the ReLU's output, nor the pool's input (the same block).
  for (TaskId r : tdfg.blocks[tdfg.output_of[relu]].readers)
    EXPECT_EQ(tdfg.tasks[r].kind, TaskKind::FP) << tdfg.tasks[r].name;
  // The plain model keeps both: the ReLU's BP1 and the pool's read them.
  const Tdfg plain = build_tdfg(model);
  EXPECT_EQ(plain.saved_of[relu], kNoBlock);
  EXPECT_EQ(plain.saved_of[pool], kNoBlock);
  EXPECT_EQ(reads(plain, plain.bp1_of[pool]), (Names{"Y[bn1+relu1]", "Y[pool1]", "dY[pool1]"}));
  EXPECT_EQ(reads(plain, plain.bp1_of[relu]), (Names{"Y[bn1+relu1]", "dY[conv1+bn1+relu1]"}));
}

TEST(CompactBackward, TheDigestIgnoresTheVariants) {
  // A plan names its variants itself (docs/plan-format.md), so that the
  // model beside it is the user's, unchanged.
  const Model model = parsed(
      "  - {name: conv1, op: conv, out: 8, kernel: 3, pad: 1}\n"
      "  - {name: relu1, op: relu}\n"
      "  - {name: pool1, op: pool, mode: max, kernel: 2, stride: 2}\n");
  Result<Model> compact = with_compact_backward(model, Names{"relu1", "pool1"});
  ASSERT_TRUE(compact.ok());
  EXPECT_EQ(model_digest(*compact), model_digest(model));
  EXPECT_EQ(compact_backward_names(*compact), (Names{"relu1", "pool1"}));
}

}  // namespace
}  // namespace mplan
