// Semantics the finite differences cannot see: PyTorch's pooling output sizes,
// SGD's update, full-batch loss averaging across sub-batches, dropout masks that
// do not depend on the sub-batch, batch-norm running statistics, and .npy files.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "runtime/npy.h"
#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;

TEST(Pool, OutputSizesMatchPyTorch) {
  // Values from torch.nn.MaxPool2d(kernel, stride, pad, ceil_mode) on the given input.
  EXPECT_EQ(pool_output_size(6, 3, 2, 0, false), 2);
  EXPECT_EQ(pool_output_size(6, 3, 2, 0, true), 3);
  EXPECT_EQ(pool_output_size(5, 2, 2, 1, false), 3);
  // ceil: (5+2-2+1)/2+1 = 4, but the 4th window would start at 6 >= 5+1: 3.
  EXPECT_EQ(pool_output_size(5, 2, 2, 1, true), 3);
  EXPECT_EQ(pool_output_size(55, 3, 2, 0, false), 27);  // AlexNet pool1
  EXPECT_EQ(pool_output_size(112, 3, 2, 1, false), 56);  // ResNet stem
  EXPECT_EQ(pool_output_size(14, 3, 2, 0, true), 7);     // GoogLeNet, ceil_mode
  EXPECT_EQ(pool_output_size(14, 3, 2, 0, false), 6);
}

TEST(Pool, AvgPoolCountsPaddingLikePyTorch) {
  // 2x2 input of ones, kernel 2, stride 2, pad 1: every window holds one input
  // element and three padding zeros, divisor 4 (count_include_pad=True).
  PoolShape sh{1, 1, 2, 2, 2, 2, 2, 2, 1, 1, false};
  ASSERT_EQ(sh.p(), 2);
  std::vector<float> x(4, 1.0f), y(4);
  avg_pool_forward(sh, x.data(), y.data());
  for (float v : y) EXPECT_FLOAT_EQ(v, 0.25f);
  // Ceil mode: 3x3 input, kernel 2, stride 2, no pad -> 2x2; the last window is cut
  // at the input's edge (beyond the padding), so its divisor shrinks: 1 element.
  PoolShape ceil{1, 1, 3, 3, 2, 2, 2, 2, 0, 0, true};
  ASSERT_EQ(ceil.p(), 2);
  std::vector<float> x9(9, 1.0f), y4(4);
  avg_pool_forward(ceil, x9.data(), y4.data());
  for (float v : y4) EXPECT_FLOAT_EQ(v, 1.0f);
}

TEST(Sgd, MatchesAHandComputation) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01), two steps.
  std::vector<float> w = {1.0f, -2.0f}, buf(2, 123.0f);
  std::vector<float> g1 = {0.5f, 0.25f}, g2 = {-1.0f, 2.0f};
  sgd_step(w.data(), g1.data(), buf.data(), 2, 0.1f, 0.9f, 0.01f, /*first_step=*/true);
  // d = g + wd*w = {0.51, 0.23}; buf = d; w -= 0.1*d -> {0.949, -2.023}
  EXPECT_NEAR(buf[0], 0.51f, 1e-6);
  EXPECT_NEAR(buf[1], 0.23f, 1e-6);
  EXPECT_NEAR(w[0], 0.949f, 1e-6);
  EXPECT_NEAR(w[1], -2.023f, 1e-6);
  sgd_step(w.data(), g2.data(), buf.data(), 2, 0.1f, 0.9f, 0.01f, /*first_step=*/false);
  // d = {-1 + 0.00949, 2 - 0.02023} = {-0.99051, 1.97977}
  // buf = 0.9*{0.51, 0.23} + d = {-0.53151, 2.18677}; w -= 0.1*buf
  EXPECT_NEAR(buf[0], -0.53151f, 1e-6);
  EXPECT_NEAR(buf[1], 2.18677f, 1e-6);
  EXPECT_NEAR(w[0], 0.949f + 0.053151f, 1e-6);
  EXPECT_NEAR(w[1], -2.023f - 0.218677f, 1e-6);
  // Without momentum the buffer is not touched: w -= lr * (g + wd*w).
  std::vector<float> v = {2.0f}, gv = {1.0f};
  sgd_step(v.data(), gv.data(), nullptr, 1, 0.5f, 0.0f, 0.1f, true);
  EXPECT_NEAR(v[0], 2.0f - 0.5f * 1.2f, 1e-6);
}

TEST(SoftmaxXent, TwoSubBatchesEqualOneFullBatch) {
  const int64_t batch = 6, half = 3, classes = 4;
  auto logits = random_vector(batch * classes, 1, -3.0f, 3.0f);
  std::vector<int32_t> labels = {0, 3, 2, 1, 1, 0};
  std::vector<float> probs(batch * classes), d_full(batch * classes), d_split(batch * classes);
  float loss_full = 0.0f, loss_split = 0.0f;
  softmax_xent_forward(logits.data(), labels.data(), probs.data(), &loss_full, batch, classes, false);
  softmax_xent_backward(probs.data(), labels.data(), d_full.data(), batch, classes, 1.0f / batch, false);
  for (int sub = 0; sub < 2; ++sub) {
    const int64_t first = sub * half;
    softmax_xent_forward(logits.data() + first * classes, labels.data() + first,
                         probs.data() + first * classes, &loss_split, half, classes,
                         /*accumulate_loss=*/sub > 0);
    // scale = 1 / full batch, not 1 / sub-batch.
    softmax_xent_backward(probs.data() + first * classes, labels.data() + first,
                          d_split.data() + first * classes, half, classes, 1.0f / batch, false);
  }
  EXPECT_NEAR(loss_split / batch, loss_full / batch, 1e-6);
  for (size_t i = 0; i < d_full.size(); ++i) EXPECT_NEAR(d_split[i], d_full[i], 1e-7) << i;
  // And the summed loss is the cross-entropy: -log p[label] summed over samples.
  double expected = 0.0;
  for (int64_t b = 0; b < batch; ++b) expected -= std::log(probs[b * classes + labels[b]]);
  EXPECT_NEAR(loss_full, expected, 1e-4);
}

TEST(Dropout, MaskDependsOnTheSampleNotTheSubBatch) {
  const int64_t batch = 8, e = 64;
  auto x = random_vector(batch * e, 2);
  std::vector<float> y_full(batch * e), y_split(batch * e);
  std::vector<uint8_t> m_full(batch * e), m_split(batch * e);
  dropout_forward(x.data(), y_full.data(), m_full.data(), batch, e, 0, 0.5f, 42, 3);
  // Sub-batches of 3, 1 and 4 samples, each told its first global sample index.
  int64_t first = 0;
  for (int64_t n : {3, 1, 4}) {
    dropout_forward(x.data() + first * e, y_split.data() + first * e, m_split.data() + first * e, n,
                    e, first, 0.5f, 42, 3);
    first += n;
  }
  EXPECT_EQ(m_split, m_full);
  EXPECT_EQ(y_split, y_full);
  // Kept elements are scaled by 1/(1-p); about half are kept.
  int kept = 0;
  for (int64_t i = 0; i < batch * e; ++i) {
    if (m_full[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(y_full[i], 2.0f * x[i]);
    } else {
      EXPECT_EQ(y_full[i], 0.0f);
    }
  }
  EXPECT_GT(kept, 200);
  EXPECT_LT(kept, 312);
  // Another step or seed draws another mask.
  std::vector<float> y_other(batch * e);
  std::vector<uint8_t> m_step(batch * e), m_seed(batch * e);
  dropout_forward(x.data(), y_other.data(), m_step.data(), batch, e, 0, 0.5f, 42, 4);
  dropout_forward(x.data(), y_other.data(), m_seed.data(), batch, e, 0, 0.5f, 43, 3);
  EXPECT_NE(m_step, m_full);
  EXPECT_NE(m_seed, m_full);
}

TEST(BatchNorm, RunningStatisticsFollowPyTorch) {
  // One channel, 4 values {1, 2, 3, 6}: mean 3, biased var 3.5, unbiased 14/3.
  std::vector<float> x = {1, 2, 3, 6}, y(4), gamma = {2.0f}, beta = {0.5f};
  std::vector<float> mean(1), invstd(1), rmean = {1.0f}, rvar = {2.0f};
  batchnorm_forward_train(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(),
                          rmean.data(), rvar.data(), 2, 1, 2, 1e-5f, 0.1f);
  EXPECT_NEAR(mean[0], 3.0f, 1e-6);
  EXPECT_NEAR(invstd[0], 1.0 / std::sqrt(3.5 + 1e-5), 1e-6);
  EXPECT_NEAR(rmean[0], 0.9f * 1.0f + 0.1f * 3.0f, 1e-6);
  EXPECT_NEAR(rvar[0], 0.9f * 2.0f + 0.1f * 14.0f / 3.0f, 1e-6);
  EXPECT_NEAR(y[3], 2.0 * (6 - 3) / std::sqrt(3.5 + 1e-5) + 0.5, 1e-5);
  // Inference with the running statistics.
  std::vector<float> yi(4);
  batchnorm_forward_inference(x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), yi.data(), 2, 1, 2, 1e-5f);
  EXPECT_NEAR(yi[0], 2.0 * (1 - rmean[0]) / std::sqrt(rvar[0] + 1e-5) + 0.5, 1e-5);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mplan_rt_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Npy, RoundTripsFloatAndInt) {
  auto data = random_vector(2 * 3 * 4, 3);
  std::string error;
  const std::string path = temp_path("f32.npy");
  ASSERT_TRUE(npy_write_f32(path, data.data(), {2, 3, 4}, &error)) << error;
  NpyArray read;
  ASSERT_TRUE(npy_read(path, &read, &error)) << error;
  EXPECT_EQ(read.type, NpyType::f32);
  EXPECT_EQ(read.shape, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(read.elements(), 24);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(read.f32()[i], data[i]);
  // The header is 64-byte aligned, as numpy writes it.
  EXPECT_EQ(std::filesystem::file_size(path), 128u + 24 * 4);

  std::vector<int32_t> labels = {3, 1, 4, 1, 5};
  const std::string ipath = temp_path("i32.npy");
  ASSERT_TRUE(npy_write_i32(ipath, labels.data(), {5}, &error)) << error;
  ASSERT_TRUE(npy_read(ipath, &read, &error)) << error;
  EXPECT_EQ(read.type, NpyType::i32);
  EXPECT_EQ(read.shape, (std::vector<int64_t>{5}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(read.i32()[i], labels[i]);
  std::remove(path.c_str());
  std::remove(ipath.c_str());
}

TEST(Npy, BadFilesGiveErrorsNamingTheFile) {
  NpyArray read;
  std::string error;
  EXPECT_FALSE(npy_read(temp_path("does_not_exist.npy"), &read, &error));
  EXPECT_NE(error.find("does_not_exist.npy"), std::string::npos) << error;

  const std::string path = temp_path("f64.npy");
  {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
    header.append(128 - 10 - header.size() - 1, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {static_cast<char>(header.size()), 0};
    out.write(len, 2);
    out << header;
    double values[2] = {1, 2};
    out.write(reinterpret_cast<const char*>(values), sizeof(values));
  }
  EXPECT_FALSE(npy_read(path, &read, &error));
  EXPECT_NE(error.find("'<f8'"), std::string::npos) << error;

  // Truncated data.
  auto data = random_vector(10, 4);
  ASSERT_TRUE(npy_write_f32(path, data.data(), {10}, &error)) << error;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  EXPECT_FALSE(npy_read(path, &read, &error));
  EXPECT_NE(error.find("ends early"), std::string::npos) << error;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace mplan::rt::cpu
