// The CUDA backend's other ops against the CPU backend's kernels
// (runtime/cpu/kernels.h), on small random shapes: linear, element-wise,
// pooling (padding, ceil mode, tied maxima; the compact forms), batch norm (running statistics,
// recomputation, backward), LRN (cuDNN's window and the own kernel's),
// dropout (the same mask bytes, whatever the sub-batch), concat, the loss and SGD.

#include <algorithm>
#include <cmath>

#include "runtime/cpu/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace mplan::gpu_test {
namespace {

const rt::Context kInline;  // no stream: each op has run when it returns

TEST(GpuOps, LinearMatchesCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 3, in = 5, out = 4;
  const auto x = random_floats(n * in, 1), w = random_floats(out * in, 2), bias = random_floats(out, 3),
             dy = random_floats(n * out, 4);
  const DeviceBuffer dx_(x), dw_(w), dbias_(bias), ddy(dy);
  {
    std::vector<float> expected(n * out);
    rt::cpu::linear_forward(x.data(), w.data(), bias.data(), expected.data(), n, in, out);
    DeviceBuffer y(expected.size() * sizeof(float));
    rt::linear_forward(kInline, dx_.f32(), dw_.f32(), dbias_.f32(), y.f32(), n, in, out);
    EXPECT_TRUE(close(y.download(expected.size()), expected)) << "forward with bias";
    rt::cpu::linear_forward(x.data(), w.data(), nullptr, expected.data(), n, in, out);
    rt::linear_forward(kInline, dx_.f32(), dw_.f32(), nullptr, y.f32(), n, in, out);
    EXPECT_TRUE(close(y.download(expected.size()), expected)) << "forward without bias";
  }
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(n * in, 5);
    DeviceBuffer dx(expected);
    rt::cpu::linear_backward_data(w.data(), dy.data(), expected.data(), n, in, out, accumulate);
    rt::linear_backward_data(kInline, dw_.f32(), ddy.f32(), dx.f32(), n, in, out, accumulate);
    EXPECT_TRUE(close(dx.download(expected.size()), expected)) << "backward data, accumulate " << accumulate;
  }
  {
    std::vector<float> expected = random_floats(out * in, 6);
    DeviceBuffer dw(expected);
    rt::cpu::linear_backward_weights(x.data(), dy.data(), expected.data(), n, in, out, true);
    rt::linear_backward_weights(kInline, dx_.f32(), ddy.f32(), dw.f32(), n, in, out);
    EXPECT_TRUE(close(dw.download(expected.size()), expected)) << "backward weights (accumulating)";
  }
  {
    std::vector<float> expected = random_floats(out, 7);
    DeviceBuffer db(expected);
    rt::cpu::linear_backward_bias(dy.data(), expected.data(), n, out, true);
    rt::linear_backward_bias(kInline, ddy.f32(), db.f32(), n, out);
    EXPECT_TRUE(close(db.download(expected.size()), expected)) << "backward bias (accumulating)";
  }
}

TEST(GpuOps, CopyOrAddAndReluMatchCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t count = 1000;
  const auto a = random_floats(count, 1), b = random_floats(count, 2);
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = b;
    rt::cpu::copy_or_add(a.data(), expected.data(), count, accumulate);
    const DeviceBuffer src(a);
    DeviceBuffer dst(b);
    rt::copy_or_add(kInline, src.f32(), dst.f32(), count, accumulate);
    EXPECT_TRUE(close(dst.download(count), expected)) << "accumulate " << accumulate;
  }
  // add's forward of two inputs: into a third buffer and in place over either
  // input; four-wide, and with a scalar tail (count - 1)
  for (const int64_t n : {count, count - 1}) {
    std::vector<float> expected(static_cast<size_t>(n));
    const float* inputs[] = {a.data(), b.data()};
    rt::cpu::add_forward(inputs, 2, expected.data(), n);
    const DeviceBuffer x0(a), x1(b);
    DeviceBuffer y(std::vector<float>(static_cast<size_t>(count), 0.0f)), in_a(a), in_b(b);
    rt::add_two(kInline, x0.f32(), x1.f32(), y.f32(), n);
    rt::add_two(kInline, in_a.f32(), x1.f32(), in_a.f32(), n);
    rt::add_two(kInline, x0.f32(), in_b.f32(), in_b.f32(), n);
    EXPECT_EQ(y.download(n), expected) << "add_two: the CPU's bits, " << n;
    EXPECT_EQ(in_a.download(n), expected) << "add_two into a, " << n;
    EXPECT_EQ(in_b.download(n), expected) << "add_two into b, " << n;
  }
  {  // relu in place, then its backward in place (dx = dy)
    std::vector<float> y = a;
    rt::cpu::relu_forward(a.data(), y.data(), count);
    DeviceBuffer x(a);
    rt::relu_forward(kInline, x.f32(), x.f32(), count);
    EXPECT_TRUE(close(x.download(count), y)) << "relu forward in place";
    for (bool accumulate : {false, true}) {
      std::vector<float> dx = accumulate ? random_floats(count, 3) : b;
      std::vector<float> expected = dx;
      rt::cpu::relu_backward(y.data(), b.data(), expected.data(), count, accumulate);
      const DeviceBuffer dy(b);
      DeviceBuffer ddx(dx);
      rt::relu_backward(kInline, x.f32(), dy.f32(), ddx.f32(), count, accumulate);
      EXPECT_TRUE(close(ddx.download(count), expected)) << "relu backward, accumulate " << accumulate;
    }
    DeviceBuffer in_place(b);  // dx = dy
    std::vector<float> expected = b;
    rt::cpu::relu_backward(y.data(), b.data(), expected.data(), count, false);
    rt::relu_backward(kInline, x.f32(), in_place.f32(), in_place.f32(), count, false);
    EXPECT_TRUE(close(in_place.download(count), expected)) << "relu backward in place";
  }
  {  // NaN stays NaN (--debug-poison sees a poisoned input downstream); -0 and negatives become +0
    const std::vector<float> special = {std::nanf(""), -0.0f, -1.5f, 2.5f, 0.0f, 1e-30f, -1e-30f};
    DeviceBuffer v(special);
    rt::relu_forward(kInline, v.f32(), v.f32(), static_cast<int64_t>(special.size()));
    const std::vector<float> got = v.download(special.size());
    EXPECT_TRUE(std::isnan(got[0]));
    for (size_t i : {1, 2, 4, 6}) EXPECT_TRUE(got[i] == 0.0f && !std::signbit(got[i])) << "element " << i;
    EXPECT_EQ(got[3], 2.5f);
    EXPECT_EQ(got[5], 1e-30f);
  }
}

// The add and relu backward take four elements at a time where their pointers
// are 16-byte aligned: a count that is no multiple of 4 (the tail) and
// pointers one element off (the scalar path) must give the same values.
TEST(GpuOps, AddAndReluBackwardTailsAndUnalignedPointersMatchCpu) {
  MPLAN_REQUIRE_GPU();
  for (int64_t offset : {0, 1})
    for (int64_t count : {1, 3, 4, 1003}) {
      const int64_t total = count + offset;
      const auto a = random_floats(total, 11), b = random_floats(total, 12), y = random_floats(total, 13);
      std::vector<float> expected(b.begin() + offset, b.end());
      rt::cpu::copy_or_add(a.data() + offset, expected.data(), count, true);
      const DeviceBuffer src(a);
      DeviceBuffer dst(b);
      rt::copy_or_add(kInline, src.f32() + offset, dst.f32() + offset, count, true);
      std::vector<float> got = dst.download(total);
      EXPECT_TRUE(close(std::vector<float>(got.begin() + offset, got.end()), expected))
          << "add, count " << count << ", offset " << offset;
      EXPECT_TRUE(offset == 0 || got[0] == b[0]) << "add wrote before its range";
      for (bool accumulate : {false, true}) {
        std::vector<float> want(a.begin() + offset, a.end());
        rt::cpu::relu_backward(y.data() + offset, b.data() + offset, want.data(), count, accumulate);
        const DeviceBuffer dy(b), yy(y);
        DeviceBuffer dx(a);
        rt::relu_backward(kInline, yy.f32() + offset, dy.f32() + offset, dx.f32() + offset, count, accumulate);
        got = dx.download(total);
        EXPECT_TRUE(close(std::vector<float>(got.begin() + offset, got.end()), want))
            << "relu backward, count " << count << ", offset " << offset << ", accumulate " << accumulate;
      }
    }
}

// PoolShape{n, c, h, w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, ceil_mode}
const rt::PoolShape kPools[] = {
    {2, 3, 7, 8, 3, 3, 2, 2, 1, 1, true},   // the last windows hang over the right padding
    {2, 3, 7, 7, 2, 2, 2, 2, 0, 0, true},   // ... and over the input's end, without padding
    {1, 2, 9, 6, 3, 3, 1, 1, 1, 1, false},  // overlapping windows
    {2, 2, 6, 6, 2, 3, 2, 1, 1, 0, false},  // rectangular
};

std::vector<float> pool_input(const rt::PoolShape& s, uint32_t seed) {
  // After a ReLU: half zeros, so max-pool windows tie and the routing rule shows.
  std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, seed);
  for (float& v : x) v = std::max(v, 0.0f);
  return x;
}

TEST(GpuOps, MaxPoolMatchesCpuIncludingTiedMaxima) {
  MPLAN_REQUIRE_GPU();
  for (const rt::PoolShape& s : kPools) {
    const int64_t in = s.n * s.c * s.h * s.w, out = s.n * s.c * s.p() * s.q();
    const auto x = pool_input(s, 1), dy = random_floats(out, 2);
    std::vector<float> y(out);
    rt::cpu::max_pool_forward(s, x.data(), y.data());
    const DeviceBuffer dx_in(x), ddy(dy);
    DeviceBuffer dy_out(out * sizeof(float));
    rt::max_pool_forward(kInline, s, dx_in.f32(), dy_out.f32());
    EXPECT_TRUE(close(dy_out.download(out), y)) << "forward " << s.h << "x" << s.w << " ceil " << s.ceil_mode;
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(in, 3);
      DeviceBuffer dx(expected);
      rt::cpu::max_pool_backward(s, x.data(), y.data(), dy.data(), expected.data(), accumulate);
      rt::max_pool_backward(kInline, s, dx_in.f32(), dy_out.f32(), ddy.f32(), dx.f32(), accumulate);
      EXPECT_TRUE(close(dx.download(in), expected)) << "backward " << s.h << "x" << s.w << " ceil " << s.ceil_mode
                                                    << " accumulate " << accumulate;
    }
  }
}

// The compact forms (runtime/ops.h) on the GPU give its plain forms' y and dx
// bit for bit, and the CPU's masks and places.
TEST(GpuOps, CompactMaxPoolAndReluMatchThePlainFormsBitForBit) {
  MPLAN_REQUIRE_GPU();
  for (const rt::PoolShape& s : kPools) {
    const int64_t in = s.n * s.c * s.h * s.w, out = s.n * s.c * s.p() * s.q();
    const auto x = pool_input(s, 1), dy = random_floats(out, 2);
    std::vector<float> y(out);
    std::vector<uint8_t> places(out);
    rt::cpu::max_pool_forward_indices(s, x.data(), y.data(), places.data());
    const DeviceBuffer dx_in(x), ddy(dy);
    DeviceBuffer plain_y(out * sizeof(float)), compact_y(out * sizeof(float)), dplaces(out);
    rt::max_pool_forward(kInline, s, dx_in.f32(), plain_y.f32());
    rt::max_pool_forward_indices(kInline, s, dx_in.f32(), compact_y.f32(), dplaces.u8());
    EXPECT_EQ(compact_y.download(out), plain_y.download(out)) << "forward " << s.h << "x" << s.w;
    EXPECT_EQ(dplaces.download<uint8_t>(out), places) << "places " << s.h << "x" << s.w;
    for (bool accumulate : {false, true}) {
      const std::vector<float> start = random_floats(in, 3);
      DeviceBuffer plain_dx(start), compact_dx(start);
      rt::max_pool_backward(kInline, s, dx_in.f32(), plain_y.f32(), ddy.f32(), plain_dx.f32(), accumulate);
      rt::max_pool_backward_indices(kInline, s, dplaces.u8(), ddy.f32(), compact_dx.f32(), accumulate);
      EXPECT_EQ(compact_dx.download(in), plain_dx.download(in)) << "backward " << s.h << "x" << s.w;
    }
  }
  for (int64_t count : {1, 9, 64, 1003, 4096}) {
    const auto x = random_floats(count, 4), dy = random_floats(count, 5);
    std::vector<float> y(count);
    std::vector<uint8_t> mask((count + 7) / 8);
    rt::cpu::relu_forward_mask(x.data(), y.data(), mask.data(), count);
    const DeviceBuffer dx_in(x), ddy(dy);
    DeviceBuffer plain_y(count * sizeof(float)), compact_y(count * sizeof(float)), dmask(mask.size());
    rt::relu_forward(kInline, dx_in.f32(), plain_y.f32(), count);
    rt::relu_forward_mask(kInline, dx_in.f32(), compact_y.f32(), dmask.u8(), count);
    EXPECT_EQ(compact_y.download(count), plain_y.download(count)) << count;
    EXPECT_EQ(dmask.download<uint8_t>(mask.size()), mask) << count;
    for (bool accumulate : {false, true}) {
      const std::vector<float> start = random_floats(count, 6);
      DeviceBuffer plain_dx(start), compact_dx(start);
      rt::relu_backward(kInline, plain_y.f32(), ddy.f32(), plain_dx.f32(), count, accumulate);
      rt::relu_backward_mask(kInline, dmask.u8(), ddy.f32(), compact_dx.f32(), count, accumulate);
      EXPECT_EQ(compact_dx.download(count), plain_dx.download(count)) << count << " accumulate " << accumulate;
    }
  }
}

TEST(GpuOps, AvgPoolMatchesCpuWithPaddingAndCeilMode) {
  MPLAN_REQUIRE_GPU();
  for (const rt::PoolShape& s : kPools) {
    const int64_t in = s.n * s.c * s.h * s.w, out = s.n * s.c * s.p() * s.q();
    const auto x = random_floats(in, 4), dy = random_floats(out, 5);
    std::vector<float> y(out);
    rt::cpu::avg_pool_forward(s, x.data(), y.data());
    const DeviceBuffer dx_in(x), ddy(dy);
    DeviceBuffer dy_out(out * sizeof(float));
    rt::avg_pool_forward(kInline, s, dx_in.f32(), dy_out.f32());
    EXPECT_TRUE(close(dy_out.download(out), y)) << "forward " << s.h << "x" << s.w << " ceil " << s.ceil_mode;
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(in, 6);
      DeviceBuffer dx(expected);
      rt::cpu::avg_pool_backward(s, dy.data(), expected.data(), accumulate);
      rt::avg_pool_backward(kInline, s, ddy.f32(), dx.f32(), accumulate);
      EXPECT_TRUE(close(dx.download(in), expected)) << "backward " << s.h << "x" << s.w << " ceil " << s.ceil_mode
                                                    << " accumulate " << accumulate;
    }
  }
}

TEST(GpuOps, GlobalAvgPoolMatchesCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 2, c = 3, hw = 10;
  const auto x = random_floats(n * c * hw, 1), dy = random_floats(n * c, 2);
  std::vector<float> y(n * c);
  rt::cpu::global_avg_pool_forward(x.data(), y.data(), n, c, hw);
  const DeviceBuffer dx_in(x), ddy(dy);
  DeviceBuffer dy_out(n * c * sizeof(float));
  rt::global_avg_pool_forward(kInline, dx_in.f32(), dy_out.f32(), n, c, hw);
  EXPECT_TRUE(close(dy_out.download(n * c), y));
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(n * c * hw, 3);
    DeviceBuffer dx(expected);
    rt::cpu::global_avg_pool_backward(dy.data(), expected.data(), n, c, hw, accumulate);
    rt::global_avg_pool_backward(kInline, ddy.f32(), dx.f32(), n, c, hw, accumulate);
    EXPECT_TRUE(close(dx.download(n * c * hw), expected)) << "accumulate " << accumulate;
  }
}

// Batch norm on (n, c, hw): the cuDNN path (many values per channel) and the
// own kernel's (one value per channel).
void check_batchnorm(int64_t n, int64_t c, int64_t hw) {
  SCOPED_TRACE("batch norm n=" + std::to_string(n) + " c=" + std::to_string(c) + " hw=" + std::to_string(hw));
  const int64_t all = n * c * hw;
  const float eps = 1e-5f, momentum = 0.1f;
  const auto x = random_floats(all, 1, -0.7f, 1.9f), gamma = random_floats(c, 2, 0.5f, 1.5f),
             beta = random_floats(c, 3), dy = random_floats(all, 4);
  const auto running_mean0 = random_floats(c, 5), running_var0 = random_floats(c, 6, 0.5f, 2.0f);
  // CPU reference: forward, then backward from its saved statistics.
  std::vector<float> y(all), mean(c), invstd(c), running_mean = running_mean0, running_var = running_var0;
  rt::cpu::batchnorm_forward_train(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(),
                                   running_mean.data(), running_var.data(), n, c, hw, eps, momentum);
  const DeviceBuffer dx_in(x), dgamma_in(gamma), dbeta_in(beta), ddy(dy);
  DeviceBuffer gy(all * sizeof(float)), gmean(c * sizeof(float)), ginvstd(c * sizeof(float)),
      grunning_mean(running_mean0), grunning_var(running_var0);
  rt::batchnorm_forward_train(kInline, dx_in.f32(), dgamma_in.f32(), dbeta_in.f32(), gy.f32(), gmean.f32(),
                              ginvstd.f32(), grunning_mean.f32(), grunning_var.f32(), n, c, hw, eps, momentum);
  EXPECT_TRUE(close(gy.download(all), y)) << "y";
  EXPECT_TRUE(close(gmean.download(c), mean)) << "saved mean";
  EXPECT_TRUE(close(ginvstd.download(c), invstd)) << "saved 1/std";
  EXPECT_TRUE(close(grunning_mean.download(c), running_mean)) << "running mean (momentum " << momentum << ")";
  EXPECT_TRUE(close(grunning_var.download(c), running_var)) << "running variance (from the unbiased variance)";

  // The rest from the CPU's statistics, so each op is checked on its own.
  const DeviceBuffer smean(mean), sinvstd(invstd);
  {
    std::vector<float> expected(all);
    rt::cpu::batchnorm_forward_saved(x.data(), gamma.data(), beta.data(), mean.data(), invstd.data(),
                                     expected.data(), n, c, hw);
    DeviceBuffer recomputed(all * sizeof(float));
    rt::batchnorm_forward_saved(kInline, dx_in.f32(), dgamma_in.f32(), dbeta_in.f32(), smean.f32(), sinvstd.f32(),
                                recomputed.f32(), n, c, hw);
    EXPECT_TRUE(close(recomputed.download(all), expected)) << "forward from saved statistics";
  }
  // dx = k*(dy - mean(dy) - x_hat*mean(dy*x_hat)), k = gamma*invstd: its terms
  // are of the size of k*dy, and over a channel of one value they cancel to 0.
  double k_dy = 0.0;
  for (int64_t i = 0; i < all; ++i) {
    const int64_t ch = i / hw % c;
    k_dy = std::max(k_dy, std::fabs(static_cast<double>(gamma[ch]) * invstd[ch] * dy[i]));
  }
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(all, 7);
    std::vector<float> unused_dgamma(c), unused_dbeta(c);
    DeviceBuffer dx(expected), workspace(2 * c * sizeof(float));
    rt::cpu::batchnorm_backward(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), expected.data(),
                                unused_dgamma.data(), unused_dbeta.data(), n, c, hw, accumulate, false);
    rt::batchnorm_backward_data(kInline, dx_in.f32(), dgamma_in.f32(), smean.f32(), sinvstd.f32(), ddy.f32(),
                                dx.f32(), workspace.f32(), n, c, hw, accumulate);
    EXPECT_TRUE(close(dx.download(all), expected, kTolerance, accumulate ? 0.0 : k_dy))
        << "backward data, accumulate " << accumulate;
  }
  {
    // In place (the TDFG's bp1_in_place): dx written over dy, as out of place.
    DeviceBuffer out_of_place(all * sizeof(float)), in_place(dy), workspace(2 * c * sizeof(float));
    rt::batchnorm_backward_data(kInline, dx_in.f32(), dgamma_in.f32(), smean.f32(), sinvstd.f32(), ddy.f32(),
                                out_of_place.f32(), workspace.f32(), n, c, hw, false);
    rt::batchnorm_backward_data(kInline, dx_in.f32(), dgamma_in.f32(), smean.f32(), sinvstd.f32(), in_place.f32(),
                                in_place.f32(), workspace.f32(), n, c, hw, false);
    EXPECT_EQ(in_place.download(all), out_of_place.download(all)) << "backward data in place";
  }
  {
    std::vector<float> dgamma = random_floats(c, 8), dbeta = random_floats(c, 9);
    DeviceBuffer gdgamma(dgamma), gdbeta(dbeta);
    rt::cpu::batchnorm_backward_params(x.data(), mean.data(), invstd.data(), dy.data(), dgamma.data(), dbeta.data(),
                                       n, c, hw, true);
    rt::batchnorm_backward_params(kInline, dx_in.f32(), smean.f32(), sinvstd.f32(), ddy.f32(), gdgamma.f32(),
                                  gdbeta.f32(), n, c, hw);
    EXPECT_TRUE(close(gdgamma.download(c), dgamma)) << "dgamma (accumulating)";
    EXPECT_TRUE(close(gdbeta.download(c), dbeta)) << "dbeta (accumulating)";
  }
}

TEST(GpuOps, BatchNormMatchesCpuWithRunningStatistics) {
  MPLAN_REQUIRE_GPU();
  check_batchnorm(4, 3, 25);  // cudnnBatchNormalizationForwardTraining
  check_batchnorm(1, 5, 1);   // one value per channel: the own kernel
}

TEST(GpuOps, LrnMatchesCpuOnCudnnAndOwnWindows) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 2, c = 7, hw = 6, all = n * c * hw;
  const float alpha = 1e-2f, beta = 0.75f, k = 1.0f;
  const auto x = random_floats(all, 1, -2.0f, 2.0f), dy = random_floats(all, 2);
  for (int64_t size : {5, 3, 4}) {  // odd sizes run on cuDNN, the even one on the own kernel
    SCOPED_TRACE("LRN size " + std::to_string(size));
    std::vector<float> y(all);
    rt::cpu::lrn_forward(x.data(), y.data(), n, c, hw, size, alpha, beta, k);
    const DeviceBuffer gx(x), gdy(dy);
    DeviceBuffer gy(all * sizeof(float));
    rt::lrn_forward(kInline, gx.f32(), gy.f32(), n, c, hw, size, alpha, beta, k);
    EXPECT_TRUE(close(gy.download(all), y)) << "forward";
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(all, 3);
      DeviceBuffer gdx(expected);
      rt::cpu::lrn_backward(x.data(), dy.data(), expected.data(), n, c, hw, size, alpha, beta, k, accumulate);
      rt::lrn_backward(kInline, gx.f32(), gy.f32(), gdy.f32(), gdx.f32(), n, c, hw, size, alpha, beta, k, accumulate);
      EXPECT_TRUE(close(gdx.download(all), expected)) << "backward, accumulate " << accumulate;
    }
  }
}

TEST(GpuOps, DropoutMaskIsTheCpuMaskWhateverTheSubBatch) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 4, elements = 100, first = 3, all = n * elements;
  const float p = 0.3f;
  const uint64_t seed = 7, step = 2;
  const auto x = random_floats(all, 1), dy = random_floats(all, 2);
  std::vector<float> y(all);
  std::vector<uint8_t> mask(all);
  rt::cpu::dropout_forward(x.data(), y.data(), mask.data(), n, elements, first, p, seed, step);
  const DeviceBuffer gx(x), gdy(dy);
  DeviceBuffer gy(all * sizeof(float)), gmask(all);
  // The batch as two sub-batches of 1 and 3 samples: the same mask bytes.
  rt::dropout_forward(kInline, gx.f32(), gy.f32(), gmask.u8(), 1, elements, first, p, seed, step);
  rt::dropout_forward(kInline, gx.f32() + elements, gy.f32() + elements, gmask.u8() + elements, n - 1, elements,
                      first + 1, p, seed, step);
  EXPECT_EQ(gmask.download<uint8_t>(all), mask);
  EXPECT_TRUE(close(gy.download(all), y)) << "kept elements scaled by 1/(1-p)";
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(all, 3);
    DeviceBuffer gdx(expected);
    rt::cpu::dropout_backward(mask.data(), dy.data(), expected.data(), all, p, accumulate);
    rt::dropout_backward(kInline, gmask.u8(), gdy.f32(), gdx.f32(), all, p, accumulate);
    EXPECT_TRUE(close(gdx.download(all), expected)) << "backward, accumulate " << accumulate;
  }
  EXPECT_EQ(rt::dropout_uniform(seed, step, 5, 9), rt::cpu::dropout_uniform(seed, step, 5, 9));
}

TEST(GpuOps, ConcatMatchesCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 2, total = 7, offset = 2, channels = 3, hw = 4;
  const auto x = random_floats(n * channels * hw, 1), y0 = random_floats(n * total * hw, 2);
  std::vector<float> expected = y0;  // the other inputs' channels stay as they were
  for (int64_t b = 0; b < n; ++b)
    std::copy(x.begin() + b * channels * hw, x.begin() + (b + 1) * channels * hw,
              expected.begin() + (b * total + offset) * hw);
  const DeviceBuffer gx(x);
  DeviceBuffer gy(y0);
  rt::concat_forward(kInline, gx.f32(), gy.f32(), n, total, offset, channels, hw);
  EXPECT_TRUE(close(gy.download(y0.size()), expected)) << "forward";
  for (bool accumulate : {false, true}) {
    std::vector<float> dx = random_floats(n * channels * hw, 3);
    DeviceBuffer gdx(dx);
    rt::cpu::concat_backward(y0.data(), dx.data(), n, total, offset, channels, hw, accumulate);
    const DeviceBuffer gdy(y0);
    rt::concat_backward(kInline, gdy.f32(), gdx.f32(), n, total, offset, channels, hw, accumulate);
    EXPECT_TRUE(close(gdx.download(dx.size()), dx)) << "backward, accumulate " << accumulate;
  }
}

TEST(GpuOps, SoftmaxCrossEntropyMatchesCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 5, classes = 7;
  const auto logits = random_floats(n * classes, 1, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  for (float smoothing : {0.0f, 0.1f}) {
    SCOPED_TRACE("label smoothing " + std::to_string(smoothing));
    std::vector<float> probs(n * classes), loss(1);
    rt::cpu::softmax_xent_forward(logits.data(), labels.data(), probs.data(), loss.data(), n, classes, false,
                                  smoothing);
    const DeviceBuffer glogits(logits), glabels(labels);
    DeviceBuffer gprobs(probs.size() * sizeof(float)), gloss(sizeof(float));
    rt::softmax_xent_forward(kInline, glogits.f32(), glabels.i32(), gprobs.f32(), gloss.f32(), n, classes, smoothing);
    EXPECT_TRUE(close(gprobs.download(probs.size()), probs)) << "probabilities";
    EXPECT_TRUE(close(gloss.download(1), loss)) << "summed loss";
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(n * classes, 2);
      DeviceBuffer gd(expected);
      rt::cpu::softmax_xent_backward(probs.data(), labels.data(), expected.data(), n, classes, 1.0f / 8, accumulate,
                                     smoothing);
      const DeviceBuffer gp(probs);
      rt::softmax_xent_backward(kInline, gp.f32(), glabels.i32(), gd.f32(), n, classes, 1.0f / 8, accumulate,
                                smoothing);
      EXPECT_TRUE(close(gd.download(expected.size()), expected)) << "gradient, accumulate " << accumulate;
    }
  }
}

TEST(GpuOps, SgdMatchesCpuAndZeroesTheGradient) {
  MPLAN_REQUIRE_GPU();
  const int64_t count = 1000;
  for (bool first : {true, false})
    for (float momentum : {0.0f, 0.9f})
    for (bool nesterov : {false, true}) {
      if (nesterov && momentum == 0) continue;
      SCOPED_TRACE("first step " + std::to_string(first) + ", momentum " + std::to_string(momentum) +
                   (nesterov ? ", Nesterov" : ""));
      std::vector<float> w = random_floats(count, 1), g = random_floats(count, 2), buf = random_floats(count, 3);
      DeviceBuffer gw(w), gg(g), gbuf(buf);
      rt::cpu::sgd_step(w.data(), g.data(), buf.data(), count, 0.1f, momentum, 5e-4f, first, nesterov);
      rt::sgd_step(kInline, gw.f32(), gg.f32(), momentum != 0 ? gbuf.f32() : nullptr, count, 0.1f, momentum, 5e-4f,
                   first, nesterov);
      EXPECT_TRUE(close(gw.download(count), w)) << "weights";
      if (momentum != 0) {
        EXPECT_TRUE(close(gbuf.download(count), buf)) << "momentum buffer";
      }
      EXPECT_EQ(gg.download(count), std::vector<float>(count, 0.0f)) << "the gradient is zeroed after use";
    }
}

}  // namespace
}  // namespace mplan::gpu_test
