// Every op's backward against central finite differences of its forward, on tiny
// shapes. L = sum(r * forward(x)) with a fixed random r, so dL/dy = r and the
// analytic gradient is backward(dy = r). Also checks that `accumulate` adds.
//
// Tolerances: forward ops run in float; with step eps = 1e-2 on inputs of scale 1,
// rounding contributes about 1e-7 * |L| / eps ~ 1e-4 and truncation eps^2 * f''' ~
// 1e-4, so |analytic - numeric| <= 2e-3 + 1e-2 * |numeric| leaves a wide margin
// while a wrong formula (a missing term, a wrong factor) misses by far more.
// Kinks (relu, max pool) are kept more than eps away from the inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::gradient_error_ratio;
using test::numeric_gradient;
using test::random_vector;

constexpr float kEps = 1e-2f;
constexpr double kAbsTol = 2e-3, kRelTol = 1e-2;

// Checks one gradient: backward(accumulate) writes into its argument.
void check_gradient(const char* what, std::vector<float>& input, const std::vector<float>& dy,
                    const std::function<void(std::vector<float>&)>& forward,
                    const std::function<void(std::vector<float>& grad, bool accumulate)>& backward) {
  std::vector<float> analytic(input.size(), 0.0f);
  backward(analytic, /*accumulate=*/false);
  std::vector<double> numeric = numeric_gradient(input, dy, forward, kEps);
  double ratio = gradient_error_ratio(analytic, numeric, kAbsTol, kRelTol);
  EXPECT_LE(ratio, 1.0) << what << ": worst error / tolerance = " << ratio;
  std::vector<float> twice = analytic;
  backward(twice, /*accumulate=*/true);
  for (size_t i = 0; i < analytic.size(); ++i)
    ASSERT_NEAR(twice[i], 2.0f * analytic[i], 1e-5f + 1e-5f * std::fabs(analytic[i]))
        << what << ": accumulate does not add, at " << i;
}

// Values spaced at least `gap` apart in random order (no ties within eps for max pool).
std::vector<float> distinct_values(size_t count, float gap, uint32_t seed) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = (static_cast<float>(i) - count / 2.0f) * gap;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

TEST(Gradcheck, Conv) {
  ConvShape sh{2, 4, 5, 4, 4, 3, 3, 2, 1, 1, 1, 2};
  auto x = random_vector(sh.x_elements(), 1), w = random_vector(sh.w_elements(), 2);
  auto bias = random_vector(sh.k, 3), dy = random_vector(sh.y_elements(), 4);
  auto forward = [&](std::vector<float>& y) {
    conv_forward(ConvAlgo::direct, sh, x.data(), w.data(), bias.data(), y.data(), nullptr, 0);
  };
  check_gradient("conv dx", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    conv_backward_data(ConvAlgo::direct, sh, w.data(), dy.data(), g.data(), nullptr, 0, acc);
  });
  check_gradient("conv dw", w, dy, forward, [&](std::vector<float>& g, bool acc) {
    conv_backward_filter(ConvAlgo::direct, sh, x.data(), dy.data(), g.data(), nullptr, 0, acc);
  });
  check_gradient("conv dbias", bias, dy, forward, [&](std::vector<float>& g, bool acc) {
    conv_backward_bias(sh, dy.data(), g.data(), acc);
  });
}

TEST(Gradcheck, Linear) {
  const int64_t n = 3, in = 5, out = 4;
  auto x = random_vector(n * in, 1), w = random_vector(out * in, 2), b = random_vector(out, 3);
  auto dy = random_vector(n * out, 4);
  auto forward = [&](std::vector<float>& y) { linear_forward(x.data(), w.data(), b.data(), y.data(), n, in, out); };
  check_gradient("linear dx", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    linear_backward_data(w.data(), dy.data(), g.data(), n, in, out, acc);
  });
  check_gradient("linear dw", w, dy, forward, [&](std::vector<float>& g, bool acc) {
    linear_backward_weights(x.data(), dy.data(), g.data(), n, in, out, acc);
  });
  check_gradient("linear dbias", b, dy, forward, [&](std::vector<float>& g, bool acc) {
    linear_backward_bias(dy.data(), g.data(), n, out, acc);
  });
}

TEST(Gradcheck, Relu) {
  auto x = distinct_values(40, 0.05f, 1);  // |x| >= 0.05 > eps: no kink crossed
  for (float& v : x) if (v == 0.0f) v = 0.5f;
  auto dy = random_vector(x.size(), 2);
  std::vector<float> y(x.size());
  auto forward = [&](std::vector<float>& out) { relu_forward(x.data(), out.data(), x.size()); };
  check_gradient("relu", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    relu_forward(x.data(), y.data(), x.size());
    relu_backward(y.data(), dy.data(), g.data(), x.size(), acc);
  });
}

TEST(Gradcheck, MaxPoolWithPadAndCeilMode) {
  // 7x6 input, 3x3 kernel, stride 2, pad 1, ceil mode: 4x4 output, windows cut by
  // padding on every side.
  PoolShape sh{2, 2, 7, 6, 3, 3, 2, 2, 1, 1, true};
  ASSERT_EQ(sh.p(), 4);
  ASSERT_EQ(sh.q(), 4);  // floor((6+2-3+1)/2)+1 = 4; (4-1)*2 = 6 < 6+1
  auto x = distinct_values(sh.n * sh.c * sh.h * sh.w, 0.05f, 3);
  auto dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), 4);
  std::vector<float> y(dy.size());
  auto forward = [&](std::vector<float>& out) { max_pool_forward(sh, x.data(), out.data()); };
  check_gradient("max pool", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    max_pool_forward(sh, x.data(), y.data());
    max_pool_backward(sh, x.data(), y.data(), dy.data(), g.data(), acc);
  });
}

TEST(Gradcheck, AvgPoolWithPadAndCeilMode) {
  PoolShape sh{2, 2, 5, 6, 2, 3, 2, 2, 1, 1, true};
  auto x = random_vector(sh.n * sh.c * sh.h * sh.w, 5);
  auto dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), 6);
  auto forward = [&](std::vector<float>& out) { avg_pool_forward(sh, x.data(), out.data()); };
  check_gradient("avg pool", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    avg_pool_backward(sh, dy.data(), g.data(), acc);
  });
}

TEST(Gradcheck, GlobalAvgPool) {
  const int64_t n = 2, c = 3, hw = 5;
  auto x = random_vector(n * c * hw, 7), dy = random_vector(n * c, 8);
  auto forward = [&](std::vector<float>& out) { global_avg_pool_forward(x.data(), out.data(), n, c, hw); };
  check_gradient("global avg pool", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    global_avg_pool_backward(dy.data(), g.data(), n, c, hw, acc);
  });
}

TEST(Gradcheck, BatchNormTraining) {
  const int64_t n = 3, c = 2, hw = 4;
  auto x = random_vector(n * c * hw, 9, -2.0f, 2.0f);
  auto gamma = random_vector(c, 10, 0.5f, 1.5f), beta = random_vector(c, 11);
  auto dy = random_vector(n * c * hw, 12);
  std::vector<float> mean(c), invstd(c), rmean(c, 0.0f), rvar(c, 1.0f);
  auto forward = [&](std::vector<float>& y) {
    batchnorm_forward_train(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(),
                            rmean.data(), rvar.data(), n, c, hw, 1e-5f, 0.1f);
  };
  std::vector<float> y(x.size()), unused(c);
  auto saved = [&] { forward(y); };
  check_gradient("batchnorm dx", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    saved();
    batchnorm_backward(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), g.data(),
                       unused.data(), unused.data(), n, c, hw, acc, false);
  });
  std::vector<float> dx(x.size());
  check_gradient("batchnorm dgamma", gamma, dy, forward, [&](std::vector<float>& g, bool acc) {
    saved();
    batchnorm_backward(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), dx.data(),
                       g.data(), unused.data(), n, c, hw, false, acc);
  });
  check_gradient("batchnorm dbeta", beta, dy, forward, [&](std::vector<float>& g, bool acc) {
    saved();
    batchnorm_backward(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), dx.data(),
                       unused.data(), g.data(), n, c, hw, false, acc);
  });
}

TEST(Gradcheck, Lrn) {
  // size 3 and an even size 4 (asymmetric window), alpha large enough to matter.
  for (int64_t size : {3, 4}) {
    const int64_t n = 2, c = 6, hw = 3;
    auto x = random_vector(n * c * hw, 13, -2.0f, 2.0f), dy = random_vector(n * c * hw, 14);
    auto forward = [&](std::vector<float>& y) { lrn_forward(x.data(), y.data(), n, c, hw, size, 3.0f, 0.75f, 1.0f); };
    check_gradient(size == 3 ? "lrn size 3" : "lrn size 4", x, dy, forward,
                   [&](std::vector<float>& g, bool acc) {
                     lrn_backward(x.data(), dy.data(), g.data(), n, c, hw, size, 3.0f, 0.75f, 1.0f, acc);
                   });
  }
}

TEST(Gradcheck, Dropout) {
  const int64_t n = 3, e = 10;
  auto x = random_vector(n * e, 15), dy = random_vector(n * e, 16);
  std::vector<uint8_t> mask(n * e);
  auto forward = [&](std::vector<float>& y) {
    dropout_forward(x.data(), y.data(), mask.data(), n, e, /*first_sample=*/4, 0.3f, 99, 7);
  };
  check_gradient("dropout", x, dy, forward, [&](std::vector<float>& g, bool acc) {
    std::vector<float> y(x.size());
    forward(y);
    dropout_backward(mask.data(), dy.data(), g.data(), n * e, 0.3f, acc);
  });
}

TEST(Gradcheck, AddConcatFlatten) {
  const int64_t n = 2, hw = 3;
  auto a = random_vector(n * 2 * hw, 17), b = random_vector(n * 2 * hw, 18);
  auto dy = random_vector(a.size(), 19);
  auto add = [&](std::vector<float>& y) {
    const float* in[] = {a.data(), b.data()};
    add_forward(in, 2, y.data(), a.size());
  };
  check_gradient("add a", a, dy, add, [&](std::vector<float>& g, bool acc) { add_backward(dy.data(), g.data(), a.size(), acc); });
  check_gradient("add b", b, dy, add, [&](std::vector<float>& g, bool acc) { add_backward(dy.data(), g.data(), b.size(), acc); });

  auto c3 = random_vector(n * 3 * hw, 20);  // a: 2 channels, c3: 3 channels
  auto dcat = random_vector(n * 5 * hw, 21);
  const int64_t channels[] = {2, 3};
  auto cat = [&](std::vector<float>& y) {
    const float* in[] = {a.data(), c3.data()};
    concat_forward(in, channels, 2, y.data(), n, hw);
  };
  check_gradient("concat first", a, dcat, cat, [&](std::vector<float>& g, bool acc) {
    concat_backward(dcat.data(), g.data(), n, 5, 0, 2, hw, acc);
  });
  check_gradient("concat second", c3, dcat, cat, [&](std::vector<float>& g, bool acc) {
    concat_backward(dcat.data(), g.data(), n, 5, 2, 3, hw, acc);
  });
  check_gradient("flatten", a, dy, [&](std::vector<float>& y) { flatten_forward(a.data(), y.data(), a.size()); },
                 [&](std::vector<float>& g, bool acc) { flatten_backward(dy.data(), g.data(), a.size(), acc); });
}

TEST(Gradcheck, SoftmaxCrossEntropy) {
  const int64_t n = 3, classes = 5, full_batch = 6;
  auto logits = random_vector(n * classes, 22, -2.0f, 2.0f);
  std::vector<int32_t> labels = {1, 4, 0};
  std::vector<float> probs(n * classes);
  // The loss averaged over the full batch: L = loss_sum / full_batch.
  std::vector<float> one = {1.0f};
  auto forward = [&](std::vector<float>& out) {
    float sum;
    softmax_xent_forward(logits.data(), labels.data(), probs.data(), &sum, n, classes, false);
    out[0] = sum / full_batch;
  };
  check_gradient("softmax xent", logits, one, forward, [&](std::vector<float>& g, bool acc) {
    std::vector<float> out(1);
    forward(out);
    softmax_xent_backward(probs.data(), labels.data(), g.data(), n, classes, 1.0f / full_batch, acc);
  });
}

}  // namespace
}  // namespace mplan::rt::cpu
