// The importer's view algebra (frontend/onnx/view.h): how reshapes and
// transposes of a layer's output are followed, and what they cannot be.

#include "frontend/onnx/view.h"

#include <gtest/gtest.h>

namespace mplan::onnx_import {
namespace {

const Dim N{1, true};
Dim d(int64_t v) { return Dim{v, false}; }

TEST(View, PlainIsTheBaseAndReportsItsDims) {
  const View v = View::plain({64, 8, 8});
  EXPECT_TRUE(v.is_plain());
  EXPECT_EQ(v.dims(), (std::vector<Dim>{N, d(64), d(8), d(8)}));
  EXPECT_EQ(v.whole_base_axis(1), 1);
  EXPECT_EQ(v.batch_axis(), 0);
}

TEST(View, ChannelShuffleIsTheChannelsCutAndSwapped) {
  // ShuffleNet: view (N, 2, 58, 8, 8), transpose(1, 2), view (N, 116, 8, 8).
  View v = View::plain({116, 8, 8});
  ASSERT_TRUE(v.reshape({N, d(2), d(58), d(8), d(8)}));
  ASSERT_TRUE(v.transpose({0, 2, 1, 3, 4}));
  ASSERT_TRUE(v.reshape({N, d(116), d(8), d(8)}));
  EXPECT_EQ(v.dims(), (std::vector<Dim>{N, d(116), d(8), d(8)}));
  EXPECT_FALSE(v.is_plain());          // the channels are permuted
  EXPECT_FALSE(v.is_reshaped_plain());  // not a plain reshape either
  const auto& channel = v.base_axis_atoms(1);
  ASSERT_EQ(channel.size(), 2u);
  EXPECT_EQ(v.group(1), (std::vector<int>{channel[1], channel[0]}));
  EXPECT_EQ(v.atom(channel[0]).size, 2);  // the groups
}

TEST(View, FlattenIsAReshapedPlainView) {
  View v = View::plain({512, 1, 1});
  ASSERT_TRUE(v.reshape({N, d(512)}));
  EXPECT_FALSE(v.is_plain());  // rank 2 over a rank-3 base
  EXPECT_TRUE(v.is_reshaped_plain());
  EXPECT_EQ(v.whole_base_axis(1), 1);  // the size-1 axes have no atoms
}

TEST(View, TheBatchIsNeverSplit) {
  View v = View::plain({4, 6});
  EXPECT_FALSE(v.reshape({d(2), Dim{1, true}, d(2), d(6)}));  // (2, N/2 ...) is no view of N
  EXPECT_TRUE(v.is_plain()) << "a refused reshape leaves the view as it was";
  EXPECT_FALSE(v.reshape({N, d(5), d(5)}));  // 24 elements per sample, not 25
}

TEST(View, PyTorchsAttentionReshapeWithTheTracedBatchWrittenAsANumber) {
  // (N, T, D) -> transpose (T, N, D) -> reshape (T, 2*heads, d) where the
  // trace ran at batch 2: the 24 holds the batch (2 x 12 heads).
  View v = View::plain({197, 768});
  ASSERT_TRUE(v.transpose({1, 0, 2}));
  EXPECT_FALSE(View(v).reshape({d(197), d(24), d(64)})) << "without the traced batch, 24 is no multiple of N";
  ASSERT_TRUE(v.reshape({d(197), d(24), d(64)}, /*literal_batch=*/2));
  EXPECT_EQ(v.dims(), (std::vector<Dim>{d(197), Dim{12, true}, d(64)}));
  ASSERT_TRUE(v.transpose({1, 0, 2}));  // (N*heads, T, d): the attention's operand
  EXPECT_EQ(v.group(0).size(), 2u);     // the batch and the heads
  EXPECT_EQ(v.whole_base_axis(1), 1);   // the tokens
}

TEST(View, ResizingAnAxisKeepsTheArrangement) {
  View v = View::plain({197, 768});
  ASSERT_TRUE(v.transpose({1, 0, 2}));  // (T, N, D)
  ASSERT_TRUE(v.resize_base_axis(2, 2304));
  EXPECT_EQ(v.dims(), (std::vector<Dim>{d(197), N, d(2304)}));
  View w = View::plain({197, 2304});
  ASSERT_TRUE(w.transpose({1, 0, 2}));
  EXPECT_TRUE(v.same_arrangement(w));
  EXPECT_FALSE(v.same_arrangement(View::plain({197, 2304})));
}

}  // namespace
}  // namespace mplan::onnx_import
