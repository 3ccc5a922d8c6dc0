// The CPU ops' fast paths agree with plain reference loops written here: the 2x2
// pooling rows (first maximum in window order, ties, odd sizes, accumulate), the
// batchnorm passes by channel blocks and chunks (more than one block of 64 channels
// and one chunk of 1024 values, against a double-precision reference), batchnorm's
// split backward (BP1 and BP2 apart) against the combined one, and dropout's mask
// against dropout_uniform element by element.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <vector>

#include "runtime/cpu/gemm_kernel.h"
#include "runtime/cpu/isa.h"
#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;
using test::relative_max_diff;

// Plain max pooling over whole windows (no padding): forward and the backward that
// routes each dy to the first maximum of its window in row-major order.
void reference_max_pool(const PoolShape& sh, const std::vector<float>& x, const std::vector<float>& dy,
                        std::vector<float>* y, std::vector<float>* dx) {
  const int64_t P = sh.p(), Q = sh.q();
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < sh.kernel_h; ++i)
          for (int64_t j = 0; j < sh.kernel_w; ++j) {
            const int64_t k = (plane * sh.h + p * sh.stride_h + i) * sh.w + q * sh.stride_w + j;
            if (x[k] > best) {
              best = x[k];
              at = k;
            }
          }
        (*y)[(plane * P + p) * Q + q] = best;
        (*dx)[at] += dy[(plane * P + p) * Q + q];
      }
}

TEST(CpuFastPaths, MaxPool2x2MatchesTheReferenceWithTiesOddSizesAndAccumulate) {
  // 7 x 9 input: the last row and column belong to no window.
  const PoolShape sh{3, 2, 7, 9, 2, 2, 2, 2, 0, 0, false};
  auto x = random_vector(sh.n * sh.c * sh.h * sh.w, 1);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = 0.5f;  // ties inside windows
  auto dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), 2);
  std::vector<float> y_ref(dy.size()), dx_ref(x.size(), 0.0f);
  reference_max_pool(sh, x, dy, &y_ref, &dx_ref);
  std::vector<float> y(dy.size()), dx(x.size(), 7.0f);
  max_pool_forward(sh, x.data(), y.data());
  max_pool_backward(sh, x.data(), y.data(), dy.data(), dx.data(), /*accumulate=*/false);
  EXPECT_EQ(y, y_ref);
  EXPECT_EQ(dx, dx_ref);
  std::vector<float> initial = random_vector(x.size(), 3), dx_acc = initial;
  max_pool_backward(sh, x.data(), y.data(), dy.data(), dx_acc.data(), /*accumulate=*/true);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(dx_acc[i], initial[i] + dx_ref[i]) << i;
}

TEST(CpuFastPaths, AvgPool2x2MatchesTheReference) {
  const PoolShape sh{2, 3, 6, 5, 2, 2, 2, 2, 0, 0, false};
  auto x = random_vector(sh.n * sh.c * sh.h * sh.w, 4);
  auto dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), 5);
  const int64_t P = sh.p(), Q = sh.q();
  std::vector<float> y_ref(dy.size()), dx_ref(x.size(), 0.0f);
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        double sum = 0;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t k = (plane * sh.h + 2 * p + i) * sh.w + 2 * q + j;
            sum += x[k];
            dx_ref[k] += dy[(plane * P + p) * Q + q] / 4.0f;
          }
        y_ref[(plane * P + p) * Q + q] = static_cast<float>(sum / 4);
      }
  std::vector<float> y(dy.size()), dx(x.size(), 7.0f);
  avg_pool_forward(sh, x.data(), y.data());
  avg_pool_backward(sh, dy.data(), dx.data(), /*accumulate=*/false);
  EXPECT_LE(relative_max_diff(y, y_ref), 1e-6);
  EXPECT_LE(relative_max_diff(dx, dx_ref), 1e-6);
}

// Batchnorm over 70 channels (two blocks of 64) of 1030 values per plane (two chunks
// of 1024), values far from zero (the shifted sums' case), against double precision.
TEST(CpuFastPaths, BatchnormBlocksAndChunksMatchADoubleReference) {
  const int64_t n = 3, c = 70, hw = 1030;
  auto x = random_vector(n * c * hw, 6, 95.0f, 105.0f);
  auto dy = random_vector(x.size(), 7);
  auto gamma = random_vector(c, 8, 0.5f, 1.5f), beta = random_vector(c, 9);
  std::vector<float> y(x.size()), mean(c), invstd(c), rmean(c, 0.0f), rvar(c, 1.0f);
  batchnorm_forward_train(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(), rmean.data(),
                          rvar.data(), n, c, hw, 1e-5f, 0.1f);
  std::vector<float> dx(x.size()), dgamma(c), dbeta(c);
  batchnorm_backward(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), dx.data(), dgamma.data(),
                     dbeta.data(), n, c, hw, false, false);
  std::vector<float> y_ref(x.size()), dx_ref(x.size()), mean_ref(c), invstd_ref(c), rvar_ref(c), dgamma_ref(c),
      dbeta_ref(c);
  const double count = static_cast<double>(n * hw);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, squares = 0, sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) sum += x[(b * c + ch) * hw + i];
    const double m = sum / count;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) squares += std::pow(x[(b * c + ch) * hw + i] - m, 2);
    const double is = 1.0 / std::sqrt(squares / count + 1e-5);
    mean_ref[ch] = static_cast<float>(m);
    invstd_ref[ch] = static_cast<float>(is);
    rvar_ref[ch] = static_cast<float>(0.9 + 0.1 * squares / (count - 1));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        y_ref[at] = static_cast<float>((x[at] - m) * is * gamma[ch] + beta[ch]);
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * (x[at] - m) * is;
      }
    dgamma_ref[ch] = static_cast<float>(sum_dy_xhat);
    dbeta_ref[ch] = static_cast<float>(sum_dy);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        dx_ref[at] = static_cast<float>(gamma[ch] * is *
                                        (dy[at] - sum_dy / count - (x[at] - m) * is * sum_dy_xhat / count));
      }
  }
  EXPECT_LE(relative_max_diff(mean, mean_ref), 1e-6);
  EXPECT_LE(relative_max_diff(invstd, invstd_ref), 1e-5);
  EXPECT_LE(relative_max_diff(rvar, rvar_ref), 1e-5);
  EXPECT_LE(relative_max_diff(y, y_ref), 1e-5);
  EXPECT_LE(relative_max_diff(dx, dx_ref), 1e-5);
  EXPECT_LE(relative_max_diff(dgamma, dgamma_ref), 1e-5);
  EXPECT_LE(relative_max_diff(dbeta, dbeta_ref), 1e-5);

  // BP1 and BP2 apart (as the generated program runs them) give the combined result.
  std::vector<float> dx_split(x.size(), 3.0f), dgamma_split(c, 1.0f), dbeta_split(c, 2.0f);
  batchnorm_backward_data(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), dx_split.data(), n, c,
                          hw, /*accumulate=*/false);
  batchnorm_backward_params(x.data(), mean.data(), invstd.data(), dy.data(), dgamma_split.data(),
                            dbeta_split.data(), n, c, hw, /*accumulate=*/true);
  EXPECT_EQ(dx_split, dx);
  // BP1 in place (the TDFG's bp1_in_place): dx written over dy, bit for bit the same.
  std::vector<float> in_place = dy;
  batchnorm_backward_data(x.data(), gamma.data(), mean.data(), invstd.data(), in_place.data(), in_place.data(), n, c,
                          hw, /*accumulate=*/false);
  EXPECT_EQ(in_place, dx);
  for (int64_t ch = 0; ch < c; ++ch) {  // the sums are added in double, then rounded once
    EXPECT_NEAR(dgamma_split[ch], 1.0f + dgamma[ch], 1e-6 * (1.0 + std::fabs(dgamma[ch])));
    EXPECT_NEAR(dbeta_split[ch], 2.0f + dbeta[ch], 1e-6 * (1.0 + std::fabs(dbeta[ch])));
  }
}

TEST(CpuFastPaths, DropoutMaskIsDropoutUniformPerElement) {
  const int64_t n = 3, e = 1000, first = 5;
  const float p = 0.3f;
  auto x = random_vector(n * e, 10);
  std::vector<float> y(x.size());
  std::vector<uint8_t> mask(x.size());
  dropout_forward(x.data(), y.data(), mask.data(), n, e, first, p, 11, 12);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < e; ++i) {
      const bool keep = dropout_uniform(11, 12, first + b, i) >= p;
      ASSERT_EQ(mask[b * e + i], keep ? 1 : 0) << b << " " << i;
      ASSERT_FLOAT_EQ(y[b * e + i], keep ? x[b * e + i] / (1.0f - p) : 0.0f);
    }
}

}  // namespace
}  // namespace mplan::rt::cpu

namespace mplan::rt::cpu {
namespace {

// MPLAN_CPU_ISA caps the hand-written kernels' instruction set, so that the
// AVX2 and portable fallbacks run in this suite on an AVX-512 machine too
// (tests/runtime/CMakeLists.txt runs the kernel tests again under each cap).
TEST(CpuIsa, TheCapChoosesTheKernels) {
  const char* cap = std::getenv("MPLAN_CPU_ISA");
  const Isa isa = kernel_isa();
  if (cap != nullptr && *cap != '\0') {
    const std::string wanted = cap;
    // The cap is the ISA unless this CPU has less.
    EXPECT_TRUE(wanted == isa_name(isa) || (wanted == "avx512" && isa != Isa::avx512) ||
                (wanted == "avx2" && isa == Isa::portable))
        << "MPLAN_CPU_ISA=" << wanted << " gave " << isa_name(isa);
  }
  const std::string kernel = micro_kernel().name;
  EXPECT_EQ(kernel.rfind(isa_name(isa), 0), 0u) << kernel << " under " << isa_name(isa);
}

}  // namespace
}  // namespace mplan::rt::cpu
