// Memory bounds on a model small enough to compute by hand (tdfg/bounds.h).

#include <gtest/gtest.h>

#include <numeric>

#include "tdfg/bounds.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

using testing::find_task;
using testing::make_model;
using testing::plain;

// input [1,4,4] -> conv1 (2 out, 3x3, pad 1, bias) -> relu1 -> flat -> fc (3) -> loss,
// momentum 0 (no optimizer state). Bytes per sample (float32):
//   X 64, labels 4, Y[conv1] = Y[relu1] = Y[flat] = dY of each = 128,
//   Y[fc] = Y[loss] = dY[fc] = 12, loss 4 (fixed).
// Resident: W[conv1] = dW[conv1] = (2*1*9 + 2)*4 = 80, W[fc] = dW[fc] = (3*32 + 3)*4 = 396,
//   SW = 80 + 80 + 396 + 396 = 952.
Model three_layer_model() {
  return make_model(Shape{{1, 4, 4}}, 3,
                    {testing::conv("conv1", 2, 3, 1), plain("relu1", Op::relu),
                     plain("flat", Op::flatten), testing::linear("fc", 3),
                     plain("loss", Op::softmax_xent)},
                    /*batch=*/2, /*momentum=*/0.0);
}

// Without in-place activations. Tasks (execution order) and, at batch 2, the
// live intervals [first writer, last use]:
//   0 FP(conv1)  1 FP(relu1)  2 FP(flat)  3 FP(fc)  4 FP(loss)  5 BP1(loss)
//   6 BP2(fc)    7 BP1(fc)    8 BP1(flat) 9 BP1(relu1) 10 BP2(conv1) 11 update
//   X [0,10] 128, labels [0,5] 8, Y[conv1] [0,1] 256, Y[relu1] [1,9] 256,
//   Y[flat] [2,6] 256, Y[fc] [3,4] 24, Y[loss] [4,5] 24, loss [4,4] 4,
//   dY[fc] [5,7] 24, dY[flat] [7,8] 256, dY[relu1] [8,9] 256, dY[conv1] [9,10] 256.
// Non-resident bytes live during each task:
//   0: 128+8+256                  = 392
//   1: 128+8+256+256              = 648
//   2: 128+8+256+256              = 648
//   3: 128+8+256+256+24           = 672
//   4: 128+8+256+256+24+24+4      = 700
//   5: 128+8+256+256+24+24        = 696
//   6: 128+256+256+24             = 664
//   7: 128+256+24+256             = 664
//   8: 128+256+256+256            = 896   <- peak (first of the tie with 9)
//   9: 128+256+256+256            = 896
//  10: 128+256                    = 384
//  11: 0
// Liveness peak = 952 + 896 = 1848 at BP1(flat).
TEST(Bounds, LivenessPeakByHand) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model, TdfgOptions{.in_place = false});
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  EXPECT_EQ(tdfg.resident_bytes(), 952);
  const std::vector<int64_t> live = liveness_profile(tdfg, 2);
  const std::vector<int64_t> non_resident{392, 648, 648, 672, 700, 696,
                                          664, 664, 896, 896, 384, 0};
  ASSERT_EQ(live.size(), non_resident.size());
  for (size_t i = 0; i < live.size(); ++i)
    EXPECT_EQ(live[i], 952 + non_resident[i]) << "during " << tdfg.tasks[i].name;
  MemoryBounds bounds = compute_bounds(tdfg, 2);
  EXPECT_EQ(bounds.liveness_peak_bytes, 1848);
  EXPECT_EQ(bounds.liveness_peak_task, find_task(tdfg, "BP1(flat)"));
}

// With in-place activations relu1 and flat share conv1's blocks:
// M = Y[conv1+relu1+flat] [0,9] 256 and dM = dY[conv1+relu1+flat] [7,10] 256.
// Non-resident bytes live during each task:
//   0-2: 128+8+256 = 392   3: +24 = 416   4: +24+4 = 444   5: 128+8+256+24+24 = 440
//   6: 128+256+24 = 408   7: 128+256+24+256 = 664 <- peak   8, 9: 128+256+256 = 640
//   10: 128+256 = 384   11: 0
// Liveness peak = 952 + 664 = 1616 at BP1(fc).
TEST(Bounds, LivenessPeakInPlaceByHand) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model);
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  const std::vector<int64_t> live = liveness_profile(tdfg, 2);
  const std::vector<int64_t> non_resident{392, 392, 392, 416, 444, 440, 408, 664, 640, 640, 384, 0};
  ASSERT_EQ(live.size(), non_resident.size());
  for (size_t i = 0; i < live.size(); ++i)
    EXPECT_EQ(live[i], 952 + non_resident[i]) << "during " << tdfg.tasks[i].name;
  MemoryBounds bounds = compute_bounds(tdfg, 2);
  EXPECT_EQ(bounds.liveness_peak_bytes, 1616);
  EXPECT_EQ(bounds.liveness_peak_task, find_task(tdfg, "BP1(fc)"));
  EXPECT_EQ(bounds.naive_bytes, 128 + 8 + 952 + 256 + 24 + 24 + 4 + 24 + 256);
}

// Mmin (moDNN Eq. 2) as plans place blocks: every block rounded up to 256
// bytes (at least one unit), the resident region likewise:
//   W[conv1] 256 + dW[conv1] 256 + W[fc] 512 + dW[fc] 512 = 1536.
// Non-resident reads and writes at b = 1 (X 64, Y 128, Y[fc] 12, labels 4,
// loss 4: each one unit of 256):
//   without in-place: BP1(relu1) Y[relu1] + dY[relu1] + dY[conv1] = 768,
//     FP(loss) Y[fc] + labels + Y[loss] + loss = 1024 <- the largest;
//   in place: the same FP(loss) 1024 (BP1(relu1) reads and writes M, dM: 512).
// Mmin = 1536 + 1024 = 2560, set by FP(loss), in both: exactly the least
// budget `mplan compile` accepts (planner/sub_batch.h minimum_budget).
TEST(Bounds, ModnnMinimumByHand) {
  Model model = three_layer_model();
  for (bool in_place : {false, true}) {
    Tdfg tdfg = build_tdfg(model, TdfgOptions{.in_place = in_place});
    MemoryBounds bounds = compute_bounds(tdfg, 2);
    EXPECT_EQ(bounds.weight_bytes, 952);
    EXPECT_EQ(bounds.modnn_min_bytes, 2560);
    EXPECT_EQ(bounds.modnn_min_task, find_task(tdfg, "FP(loss)"));
    // Mmin does not depend on the batch it is asked at.
    EXPECT_EQ(compute_bounds(tdfg, 64).modnn_min_bytes, 2560);
  }
}

TEST(Bounds, NaiveIsTheSumOfAllBlocks) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model, TdfgOptions{.in_place = false});
  EXPECT_EQ(compute_bounds(tdfg, 2).naive_bytes, 2700);
  for (int64_t batch : {1, 7, 128}) {
    int64_t sum = 0;
    for (const Block& block : tdfg.blocks) sum += block.bytes_per_sample * batch + block.fixed_bytes;
    EXPECT_EQ(compute_bounds(tdfg, batch).naive_bytes, sum) << "batch " << batch;
  }
}

TEST(Bounds, OrderingBetweenTheBounds) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model);
  for (int64_t batch : {1, 2, 32}) {
    MemoryBounds b = compute_bounds(tdfg, batch);
    EXPECT_LE(b.weight_bytes, b.modnn_min_bytes);
    EXPECT_LE(b.liveness_peak_bytes, b.naive_bytes);
  }
}

TEST(Bounds, WorkspaceAddsOnlyDuringItsTask) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model);
  std::vector<int64_t> workspace(tdfg.tasks.size(), 0);
  workspace[0] = 1000;  // FP(conv1)
  const std::vector<int64_t> plain_live = liveness_profile(tdfg, 2);
  const std::vector<int64_t> with_workspace = liveness_profile(tdfg, 2, workspace);
  EXPECT_EQ(with_workspace[0], plain_live[0] + 1000);
  for (size_t i = 1; i < plain_live.size(); ++i) EXPECT_EQ(with_workspace[i], plain_live[i]);
}

TEST(Bounds, PerLayerTable) {
  Model model = three_layer_model();
  Tdfg tdfg = build_tdfg(model);
  MemoryBounds bounds = compute_bounds(tdfg, 2);
  ASSERT_EQ(bounds.layers.size(), 5u);
  // conv1: 20 parameters, Y 2*128, dY 2*128 (shared with relu1 and flat, which count nothing).
  EXPECT_EQ(bounds.layers[0].parameters, 20);
  EXPECT_EQ(bounds.layers[0].forward_bytes, 256);
  EXPECT_EQ(bounds.layers[0].backward_bytes, 256);
  EXPECT_EQ(bounds.layers[1].forward_bytes, 0);
  EXPECT_EQ(bounds.layers[2].backward_bytes, 0);
  // fc: 99 parameters, Y 2*12, dY 2*12.
  EXPECT_EQ(bounds.layers[3].parameters, 99);
  EXPECT_EQ(bounds.layers[3].forward_bytes, 24);
  EXPECT_EQ(bounds.layers[3].backward_bytes, 24);
  // loss: probabilities, no gradient block.
  EXPECT_EQ(bounds.layers[4].forward_bytes, 24);
  EXPECT_EQ(bounds.layers[4].backward_bytes, 0);
}

TEST(Bounds, DropoutMaskCountsInForwardBytes) {
  Model model = make_model(Shape{{1, 4, 4}}, 3,
                           {testing::conv("conv1", 2, 3, 1), plain("drop", Op::dropout),
                            plain("flat", Op::flatten), testing::linear("fc", 3),
                            plain("loss", Op::softmax_xent)},
                           /*batch=*/4);
  Tdfg tdfg = build_tdfg(model);
  MemoryBounds bounds = compute_bounds(tdfg, 4);
  // Y 4 * 32 * 4 bytes + mask 4 * 32 * 1 byte.
  EXPECT_EQ(bounds.layers[1].forward_bytes, 4 * 32 * 4 + 4 * 32);
}

}  // namespace
}  // namespace mplan
