// Cross-check of a few ops against PyTorch (float64), when /usr/bin/python3 has
// torch: conv with groups (every algorithm, every direction), batchnorm forward
// and backward with running statistics, LRN, max and avg pooling with ceil_mode,
// softmax cross-entropy; max pooling over tied inputs (where the gradient goes)
// and several steps of torch.optim.SGD with momentum and weight decay. Inputs come from fixed seeds and travel as .npy files;
// tests/runtime/torch_reference.py holds the same layer parameters.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "runtime/npy.h"
#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;
using test::relative_max_diff;

bool torch_available() {
  static const bool available =
      std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return available;
}

class TorchCrossCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch_available()) GTEST_SKIP() << "PyTorch is not installed for /usr/bin/python3";
    dir_ = std::filesystem::temp_directory_path() /
           ("mplan_rt_torch_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void put(const std::string& name, const std::vector<float>& data, std::vector<int64_t> shape) {
    std::string error;
    ASSERT_TRUE(npy_write_f32((dir_ / (name + ".npy")).string(), data.data(), shape, &error)) << error;
  }
  void run_reference() {
    const std::string script = std::string(MPLAN_SOURCE_DIR) + "/tests/runtime/torch_reference.py";
    const std::string command = "/usr/bin/python3 " + script + " " + dir_.string();
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::vector<float> reference(const std::string& name) {
    NpyArray array;
    std::string error;
    EXPECT_TRUE(npy_read((dir_ / ("ref_" + name + ".npy")).string(), &array, &error)) << error;
    return std::vector<float>(array.f32(), array.f32() + array.elements());
  }
  // Prints the max difference, as llm.c's test does ("TENSOR OK, max diff").
  void expect_close(const std::string& what, const std::vector<float>& ours, double tolerance = 1e-5) {
    std::vector<float> ref = reference(what);
    ASSERT_EQ(ours.size(), ref.size()) << what;
    double diff = relative_max_diff(ours, ref);
    EXPECT_LE(diff, tolerance) << what << ": max relative diff " << diff;
    std::printf("  %-14s %-9s max relative diff %.2e\n", what.c_str(), algo_label_.c_str(), diff);
  }

  std::filesystem::path dir_;
  std::string algo_label_;  // the convolution algorithm being checked, for the printout
};

TEST_F(TorchCrossCheck, ConvBatchNormLrnPoolSoftmax) {
  // ---- inputs ----
  struct ConvCase { std::string name; ConvShape shape; };
  const ConvCase convs[] = {
      {"conv_a", {2, 4, 7, 6, 6, 3, 3, 2, 1, 1, 2, 2}},  // stride (2,1), pad (1,2), groups 2
      {"conv_b", {2, 4, 6, 5, 6, 3, 3, 1, 1, 1, 1, 2}},  // winograd-eligible, groups 2
  };
  std::map<std::string, std::vector<float>> in;
  uint32_t seed = 100;
  for (const ConvCase& cc : convs) {
    const ConvShape& sh = cc.shape;
    in[cc.name + "_x"] = random_vector(sh.x_elements(), seed++);
    in[cc.name + "_w"] = random_vector(sh.w_elements(), seed++);
    in[cc.name + "_b"] = random_vector(sh.k, seed++);
    in[cc.name + "_dy"] = random_vector(sh.y_elements(), seed++);
    put(cc.name + "_x", in[cc.name + "_x"], {sh.n, sh.c, sh.h, sh.w});
    put(cc.name + "_w", in[cc.name + "_w"], {sh.k, sh.c / sh.groups, sh.r, sh.s});
    put(cc.name + "_b", in[cc.name + "_b"], {sh.k});
    put(cc.name + "_dy", in[cc.name + "_dy"], {sh.n, sh.k, sh.p(), sh.q()});
  }
  const int64_t bn_n = 3, bn_c = 4, bn_hw = 25;
  auto bn_x = random_vector(bn_n * bn_c * bn_hw, 200, -2.0f, 3.0f);
  auto bn_gamma = random_vector(bn_c, 201, 0.5f, 1.5f), bn_beta = random_vector(bn_c, 202);
  auto bn_dy = random_vector(bn_x.size(), 203);
  put("bn_x", bn_x, {bn_n, bn_c, 5, 5});
  put("bn_gamma", bn_gamma, {bn_c});
  put("bn_beta", bn_beta, {bn_c});
  put("bn_dy", bn_dy, {bn_n, bn_c, 5, 5});

  const int64_t lrn_n = 2, lrn_c = 7, lrn_hw = 9;
  auto lrn_x = random_vector(lrn_n * lrn_c * lrn_hw, 300, -2.0f, 2.0f);
  auto lrn_dy = random_vector(lrn_x.size(), 301);
  put("lrn_x", lrn_x, {lrn_n, lrn_c, 3, 3});
  put("lrn_dy", lrn_dy, {lrn_n, lrn_c, 3, 3});

  PoolShape pool{2, 3, 8, 7, 3, 3, 2, 2, 1, 1, true};
  auto pool_x = random_vector(pool.n * pool.c * pool.h * pool.w, 400);
  auto maxpool_dy = random_vector(pool.n * pool.c * pool.p() * pool.q(), 401);
  auto avgpool_dy = random_vector(maxpool_dy.size(), 402);
  put("pool_x", pool_x, {pool.n, pool.c, pool.h, pool.w});
  put("maxpool_dy", maxpool_dy, {pool.n, pool.c, pool.p(), pool.q()});
  put("avgpool_dy", avgpool_dy, {pool.n, pool.c, pool.p(), pool.q()});

  const int64_t xn = 5, classes = 7;
  auto logits = random_vector(xn * classes, 500, -3.0f, 3.0f);
  std::vector<int32_t> labels = {6, 0, 3, 3, 1};
  put("xent_logits", logits, {xn, classes});
  std::string error;
  ASSERT_TRUE(npy_write_i32((dir_ / "xent_labels.npy").string(), labels.data(), {xn}, &error)) << error;

  run_reference();

  // ---- conv, every algorithm the shape allows ----
  for (const ConvCase& cc : convs) {
    const ConvShape& sh = cc.shape;
    const auto& x = in[cc.name + "_x"];
    const auto& w = in[cc.name + "_w"];
    const auto& b = in[cc.name + "_b"];
    const auto& dy = in[cc.name + "_dy"];
    for (ConvAlgo algo : kConvAlgos) {
      SCOPED_TRACE(cc.name + " " + conv_algo_name(algo));
      algo_label_ = conv_algo_name(algo);
      std::vector<std::byte> ws(std::max({conv_workspace_bytes(algo, ConvDirection::forward, sh),
                                          conv_workspace_bytes(algo, ConvDirection::backward_data, sh),
                                          conv_workspace_bytes(algo, ConvDirection::backward_filter, sh)}) + 4);
      if (conv_algo_supported(algo, ConvDirection::forward, sh)) {
        std::vector<float> y(sh.y_elements());
        conv_forward(algo, sh, x.data(), w.data(), b.data(), y.data(), ws.data(), ws.size());
        expect_close(cc.name + "_y", y);
      }
      if (conv_algo_supported(algo, ConvDirection::backward_data, sh)) {
        std::vector<float> dx(sh.x_elements());
        conv_backward_data(algo, sh, w.data(), dy.data(), dx.data(), ws.data(), ws.size(), false);
        expect_close(cc.name + "_dx", dx);
      }
      if (conv_algo_supported(algo, ConvDirection::backward_filter, sh)) {
        std::vector<float> dw(sh.w_elements());
        conv_backward_filter(algo, sh, x.data(), dy.data(), dw.data(), ws.data(), ws.size(), false);
        expect_close(cc.name + "_dw", dw);
      }
    }
    algo_label_ = "";
    std::vector<float> db(sh.k);
    conv_backward_bias(sh, dy.data(), db.data(), false);
    expect_close(cc.name + "_db", db);
  }

  // ---- batchnorm ----
  std::vector<float> bn_y(bn_x.size()), mean(bn_c), invstd(bn_c), rmean(bn_c, 0.0f), rvar(bn_c, 1.0f);
  batchnorm_forward_train(bn_x.data(), bn_gamma.data(), bn_beta.data(), bn_y.data(), mean.data(),
                          invstd.data(), rmean.data(), rvar.data(), bn_n, bn_c, bn_hw, 1e-5f, 0.1f);
  std::vector<float> bn_dx(bn_x.size()), dgamma(bn_c), dbeta(bn_c);
  batchnorm_backward(bn_x.data(), bn_gamma.data(), mean.data(), invstd.data(), bn_dy.data(), bn_dx.data(),
                     dgamma.data(), dbeta.data(), bn_n, bn_c, bn_hw, false, false);
  expect_close("bn_y", bn_y);
  expect_close("bn_dx", bn_dx);
  expect_close("bn_dgamma", dgamma);
  expect_close("bn_dbeta", dbeta);
  expect_close("bn_rmean", rmean);
  expect_close("bn_rvar", rvar);

  // ---- lrn ----
  std::vector<float> lrn_y(lrn_x.size()), lrn_dx(lrn_x.size());
  lrn_forward(lrn_x.data(), lrn_y.data(), lrn_n, lrn_c, lrn_hw, 5, 0.5f, 0.75f, 2.0f);
  lrn_backward(lrn_x.data(), lrn_dy.data(), lrn_dx.data(), lrn_n, lrn_c, lrn_hw, 5, 0.5f, 0.75f, 2.0f, false);
  expect_close("lrn_y", lrn_y);
  expect_close("lrn_dx", lrn_dx);

  // ---- pools ----
  std::vector<float> pool_y(maxpool_dy.size()), pool_dx(pool_x.size());
  max_pool_forward(pool, pool_x.data(), pool_y.data());
  max_pool_backward(pool, pool_x.data(), pool_y.data(), maxpool_dy.data(), pool_dx.data(), false);
  expect_close("maxpool_y", pool_y);
  expect_close("maxpool_dx", pool_dx);
  avg_pool_forward(pool, pool_x.data(), pool_y.data());
  avg_pool_backward(pool, avgpool_dy.data(), pool_dx.data(), false);
  expect_close("avgpool_y", pool_y);
  expect_close("avgpool_dx", pool_dx);

  // ---- softmax cross-entropy: mean loss = loss_sum / batch; gradient scale 1/batch ----
  std::vector<float> probs(logits.size()), dz(logits.size());
  float loss_sum = 0.0f;
  softmax_xent_forward(logits.data(), labels.data(), probs.data(), &loss_sum, xn, classes, false);
  softmax_xent_backward(probs.data(), labels.data(), dz.data(), xn, classes, 1.0f / xn, false);
  expect_close("xent_loss", {loss_sum / xn});
  expect_close("xent_dz", dz);
  // With label smoothing 0.1 (CrossEntropyLoss(label_smoothing=0.1)).
  softmax_xent_forward(logits.data(), labels.data(), probs.data(), &loss_sum, xn, classes, false, 0.1f);
  softmax_xent_backward(probs.data(), labels.data(), dz.data(), xn, classes, 1.0f / xn, false, 0.1f);
  expect_close("xent_smooth_loss", {loss_sum / xn});
  expect_close("xent_smooth_dz", dz);
}

// Ties everywhere (a constant plane, ReLU zeros, a few levels): the exact
// routing of each gradient is PyTorch's, on the 2x2 fast path and the general one.
TEST_F(TorchCrossCheck, TiedMaxPoolAndMultiStepSgd) {
  const std::pair<std::string, PoolShape> cases[] = {{"tiedpool_a", {2, 3, 8, 10, 2, 2, 2, 2, 0, 0, false}},
                                                     {"tiedpool_b", {2, 3, 9, 8, 3, 3, 2, 2, 1, 1, true}}};
  std::map<std::string, std::vector<float>> x, dy;
  for (const auto& [name, sh] : cases) {
    x[name] = random_vector(sh.n * sh.c * sh.h * sh.w, 500);
    const int64_t plane = sh.h * sh.w;
    for (size_t k = 0; k < x[name].size(); ++k) {
      float& v = x[name][k];
      const int64_t kind = static_cast<int64_t>(k) / plane % 3;
      v = kind == 0 ? 0.25f : kind == 1 ? (v > 0.2f ? v : 0.0f) : static_cast<float>(static_cast<int>((v + 1.0f) * 1.5f));
    }
    dy[name] = random_vector(sh.n * sh.c * sh.p() * sh.q(), 501, 0.5f, 1.5f);
    put(name + "_x", x[name], {sh.n, sh.c, sh.h, sh.w});
    put(name + "_dy", dy[name], {sh.n, sh.c, sh.p(), sh.q()});
  }
  put("sgd_w", random_vector(64, 600, -2.0f, 2.0f), {64});
  const int steps = 5;
  std::vector<float> grads = random_vector(steps * 64, 601);
  put("sgd_g", grads, {steps, 64});
  run_reference();

  for (const auto& [name, sh] : cases) {
    std::vector<float> y(dy[name].size()), dx(x[name].size(), 9.0f);
    max_pool_forward(sh, x[name].data(), y.data());
    max_pool_backward(sh, x[name].data(), y.data(), dy[name].data(), dx.data(), false);
    expect_close(name + "_y", y, 0.0);
    // dy values are in [0.5, 1.5]: a gradient routed to a wrong element is off by at least a third.
    expect_close(name + "_dx", dx, 1e-6);
  }

  // ---- torch.optim.SGD(lr 0.1, momentum 0.9, weight_decay 0.05), 5 steps ----
  std::vector<float> w = random_vector(64, 600, -2.0f, 2.0f), momentum(64, 7.0f);
  for (int s = 0; s < steps; ++s)
    sgd_step(w.data(), grads.data() + s * 64, momentum.data(), 64, 0.1f, 0.9f, 0.05f, /*first_step=*/s == 0);
  expect_close("sgd_w", w, 1e-6);
  expect_close("sgd_momentum", momentum, 1e-5);
  // With Nesterov momentum.
  w = random_vector(64, 600, -2.0f, 2.0f);
  for (int s = 0; s < steps; ++s)
    sgd_step(w.data(), grads.data() + s * 64, momentum.data(), 64, 0.1f, 0.9f, 0.05f, s == 0, /*nesterov=*/true);
  expect_close("nesterov_w", w, 1e-6);
  expect_close("nesterov_momentum", momentum, 1e-5);
  // AdamW, 5 steps (the iteration's step counts its updates from 1).
  w = random_vector(64, 600, -2.0f, 2.0f);
  std::vector<float> exp_avg(64, 0.0f), exp_avg_sq(64, 0.0f);
  for (int s = 0; s < steps; ++s)
    adamw_step(w.data(), grads.data() + s * 64, exp_avg.data(), exp_avg_sq.data(), 64, 0.01f, 0.8f, 0.99f, 1e-6f, 0.05f,
               static_cast<uint64_t>(s));
  expect_close("adamw_w", w, 1e-6);
  expect_close("adamw_exp_avg", exp_avg, 1e-5);
  expect_close("adamw_exp_avg_sq", exp_avg_sq, 1e-5);
}

}  // namespace
}  // namespace mplan::rt::cpu
