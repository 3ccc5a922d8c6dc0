// The CPU kernels of the vision-model ops (runtime/cpu/*_kernels.h)
// against PyTorch in float64 (tests/runtime/vision_reference.py, when
// /usr/bin/python3 has torch): every forward and backward, written into a
// buffer full of NaN (a kernel that reads what it should overwrite fails) and
// accumulated onto one full of ones (a kernel that ignores `accumulate` fails).
// Each comparison prints its max relative difference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "runtime/cpu/activation_kernels.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/channel_kernels.h"
#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/embedding_kernels.h"
#include "runtime/cpu/normalization_kernels.h"
#include "runtime/npy.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;
using test::relative_max_diff;

bool torch_available() {
  static const bool available = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return available;
}

using Vec = std::vector<float>;

class VisionOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch_available()) GTEST_SKIP() << "PyTorch is not installed for /usr/bin/python3";
    dir_ = std::filesystem::temp_directory_path() / ("mplan_rt_vision_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A seeded random input, written for the reference.
  const Vec& input(const std::string& name, std::vector<int64_t> shape, float lo = -1.0f, float hi = 1.0f) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    Vec& v = inputs_[name] = random_vector(static_cast<size_t>(count), seed_++, lo, hi);
    std::string error;
    EXPECT_TRUE(npy_write_f32((dir_ / (name + ".npy")).string(), v.data(), shape, &error)) << error;
    return v;
  }
  void run_reference() {
    const std::string command = "/usr/bin/python3 " + std::string(MPLAN_SOURCE_DIR) +
                                "/tests/runtime/vision_reference.py " + dir_.string();
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  Vec reference(const std::string& name) {
    NpyArray array;
    std::string error;
    EXPECT_TRUE(npy_read((dir_ / ("ref_" + name + ".npy")).string(), &array, &error)) << error;
    return Vec(array.f32(), array.f32() + array.elements());
  }
  void expect_close(const std::string& what, const Vec& ours, double tolerance = 2e-5) {
    const Vec ref = reference(what);
    ASSERT_EQ(ours.size(), ref.size()) << what;
    const double diff = relative_max_diff(ours, ref);
    EXPECT_LE(diff, tolerance) << what;
    std::printf("  %-16s max relative diff %.2e\n", what.c_str(), diff);
  }
  // A gradient kernel run both ways: written over NaN, and added onto ones.
  void expect_gradient(const std::string& what, size_t count, const std::function<void(float*, bool)>& kernel) {
    Vec written(count, std::numeric_limits<float>::quiet_NaN());
    kernel(written.data(), false);
    expect_close(what, written);
    Vec added(count, 1.0f);
    kernel(added.data(), true);
    for (float& v : added) v -= 1.0f;
    const double diff = relative_max_diff(added, reference(what));
    EXPECT_LE(diff, 1e-4) << what << " accumulated";
  }

  std::filesystem::path dir_;
  std::map<std::string, Vec> inputs_;
  uint32_t seed_ = 1400;
};

TEST_F(VisionOps, EveryKernelAgreesWithPyTorch) {
  // ---- inputs (shapes and parameters as in vision_reference.py) ----
  const int64_t act_count = 240;
  const Vec& act_x = input("act_x", {act_count}, -5.0f, 8.0f);  // both sides of hardswish's and clip's kinks
  const Vec& act_dy = input("act_dy", {act_count});
  const Vec& cmul_x = input("cmul_x", {2, 3, 4});
  const Vec& cmul_s = input("cmul_s", {2, 3});
  const Vec& cmul_dy = input("cmul_dy", {2, 3, 4});
  const Vec& cscale_x = input("cscale_x", {2, 3, 4});
  const Vec& cscale_s = input("cscale_s", {3});
  const Vec& cscale_dy = input("cscale_dy", {2, 3, 4});
  const Vec& apool_x = input("apool_x", {2, 3, 7, 5});
  const Vec& apool_a_dy = input("apool_a_dy", {2, 3, 3, 4});
  const Vec& apool_b_dy = input("apool_b_dy", {2, 3, 9, 2});
  const Vec& shuffle_x = input("shuffle_x", {2, 6, 5});
  const Vec& shuffle_dy = input("shuffle_dy", {2, 6, 5});
  const Vec& slice_x = input("slice_x", {2, 6, 5});
  const Vec& slice_dy = input("slice_dy", {2, 3, 5});
  const Vec& lnc_x = input("lnc_x", {2, 5, 3, 4}, -2.0f, 3.0f);
  const Vec& lnc_w = input("lnc_w", {5}, 0.5f, 1.5f);
  const Vec& lnc_b = input("lnc_b", {5});
  const Vec& lnc_dy = input("lnc_dy", {2, 5, 3, 4});
  const Vec& lnf_x = input("lnf_x", {2, 7, 6}, -2.0f, 3.0f);
  const Vec& lnf_w = input("lnf_w", {6}, 0.5f, 1.5f);
  const Vec& lnf_b = input("lnf_b", {6});
  const Vec& lnf_dy = input("lnf_dy", {2, 7, 6});
  const Vec& mm_a = input("mm_a", {6, 4, 5});
  const Vec& mm_b = input("mm_b", {6, 5, 3});
  const Vec& mm_dy = input("mm_dy", {6, 4, 3});
  const Vec& mmt_a = input("mmt_a", {6, 4, 5});
  const Vec& mmt_b = input("mmt_b", {6, 3, 5});
  const Vec& mmt_dy = input("mmt_dy", {6, 4, 3});
  const Vec& softmax_x = input("softmax_x", {6, 7}, -3.0f, 3.0f);
  const Vec& softmax_dy = input("softmax_dy", {6, 7});
  const Vec& attp_qkv = input("attp_qkv", {2, 5, 24}, -2.0f, 2.0f);
  const Vec& attp_dy = input("attp_dy", {2, 5, 8});
  const Vec& atts_q = input("atts_q", {2, 3, 8}, -2.0f, 2.0f);
  const Vec& atts_k = input("atts_k", {2, 6, 8}, -2.0f, 2.0f);
  const Vec& atts_v = input("atts_v", {2, 6, 8});
  const Vec& atts_dy = input("atts_dy", {2, 3, 8});
  const Vec& patch_x = input("patch_x", {2, 3, 9, 8});
  const Vec& patch_w = input("patch_w", {5, 3, 4, 4});
  const Vec& patch_b = input("patch_b", {5});
  const Vec& patch_dy = input("patch_dy", {2, 4, 5});
  const Vec& token_x = input("token_x", {2, 4, 3});
  const Vec& token_t = input("token_t", {1, 1, 3});
  const Vec& token_dy = input("token_dy", {2, 5, 3});
  const Vec& pos_x = input("pos_x", {2, 5, 3});
  const Vec& pos_p = input("pos_p", {1, 5, 3});
  const Vec& pos_dy = input("pos_dy", {2, 5, 3});
  struct ConvCase {
    std::string name;
    ConvShape shape;
  };
  // {n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups, dilation_h, dilation_w}
  const ConvCase convs[] = {{"cdil", {2, 4, 9, 8, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2}},
                            {"cdw", {2, 4, 7, 7, 4, 3, 3, 2, 2, 1, 1, 4, 1, 1}},
                            {"cdw2", {2, 4, 6, 7, 8, 5, 5, 1, 1, 2, 2, 4, 1, 1}}};
  for (const ConvCase& cc : convs) {
    const ConvShape& s = cc.shape;
    ASSERT_TRUE(s.valid()) << cc.name;
    // Dilated shapes run conv_general.cpp's loops; depthwise ones every CPU algorithm.
    ASSERT_EQ(conv_takes_general_path(s), s.dilation_h != 1 || s.dilation_w != 1) << cc.name;
    input(cc.name + "_x", {s.n, s.c, s.h, s.w});
    input(cc.name + "_w", {s.k, s.c / s.groups, s.r, s.s});
    input(cc.name + "_b", {s.k});
    input(cc.name + "_dy", {s.n, s.k, s.p(), s.q()});
  }
  run_reference();

  // ---- activations ----
  struct Activation {
    std::string name;
    std::function<void(const float*, float*)> forward;
    std::function<void(float*, bool)> backward;
  };
  Vec y(act_count);
  const float* x = act_x.data();
  const float* dy = act_dy.data();
  const int64_t n = act_count;
  const Activation activations[] = {
      {"hardswish", [&](const float* in, float* out) { hardswish_forward(in, out, n); },
       [&](float* dx, bool acc) { hardswish_backward(x, dy, dx, n, acc); }},
      {"hardsigmoid", [&](const float* in, float* out) { hardsigmoid_forward(in, out, n); },
       [&](float* dx, bool acc) { hardsigmoid_backward(x, dy, dx, n, acc); }},
      {"silu", [&](const float* in, float* out) { silu_forward(in, out, n); },
       [&](float* dx, bool acc) { silu_backward(x, dy, dx, n, acc); }},
      {"sigmoid", [&](const float* in, float* out) { sigmoid_forward(in, out, n); },
       [&](float* dx, bool acc) { sigmoid_backward(y.data(), dy, dx, n, acc); }},
      {"gelu", [&](const float* in, float* out) { gelu_forward(in, out, n, false); },
       [&](float* dx, bool acc) { gelu_backward(x, dy, dx, n, false, acc); }},
      {"gelu_tanh", [&](const float* in, float* out) { gelu_forward(in, out, n, true); },
       [&](float* dx, bool acc) { gelu_backward(x, dy, dx, n, true, acc); }},
      {"clip", [&](const float* in, float* out) { clip_forward(in, out, n, 0.0f, 6.0f); },
       [&](float* dx, bool acc) { clip_backward(y.data(), dy, dx, n, 0.0f, 6.0f, acc); }},
  };
  for (const Activation& a : activations) {
    a.forward(x, y.data());  // y is read by sigmoid's and clip's backward
    expect_close(a.name + "_y", y);
    expect_gradient(a.name + "_dx", act_count, a.backward);
  }

  // ---- per-channel multiply: per sample (squeeze-and-excitation) and shared (layer scale) ----
  for (const auto& [name, per_sample] : {std::pair{std::string("cmul"), true}, {std::string("cscale"), false}}) {
    const Vec& cx = per_sample ? cmul_x : cscale_x;
    const Vec& cs = per_sample ? cmul_s : cscale_s;
    const Vec& cdy = per_sample ? cmul_dy : cscale_dy;
    Vec cy(cx.size());
    channel_mul_forward(cx.data(), cs.data(), cy.data(), 2, 3, 4, per_sample);
    expect_close(name + "_y", cy);
    expect_gradient(name + "_dx", cx.size(), [&](float* out, bool acc) {
      channel_mul_backward_x(cs.data(), cdy.data(), out, 2, 3, 4, per_sample, acc);
    });
    expect_gradient(name + "_ds", cs.size(), [&](float* out, bool acc) {
      channel_mul_backward_s(cx.data(), cdy.data(), out, 2, 3, 4, per_sample, acc);
    });
  }

  // ---- adaptive average pooling ----
  for (const auto& [name, oh, ow] : {std::tuple{std::string("apool_a"), 3, 4}, {std::string("apool_b"), 9, 2}}) {
    Vec py(6 * oh * ow);
    adaptive_avg_pool_forward(apool_x.data(), py.data(), 6, 7, 5, oh, ow);
    expect_close(name + "_y", py);
    const Vec& pdy = name == "apool_a" ? apool_a_dy : apool_b_dy;
    expect_gradient(name + "_dx", apool_x.size(), [&](float* out, bool acc) {
      adaptive_avg_pool_backward(pdy.data(), out, 6, 7, 5, oh, ow, acc);
    });
  }

  // ---- channel shuffle (3 groups of 2), slice of channels 1..3 ----
  Vec sy(shuffle_x.size());
  channel_shuffle(shuffle_x.data(), sy.data(), 2, 6, 5, 3, false);
  expect_close("shuffle_y", sy);
  expect_gradient("shuffle_dx", shuffle_x.size(),
                  [&](float* out, bool acc) { channel_shuffle(shuffle_dy.data(), out, 2, 6, 5, 2, acc); });
  Vec slice_y(slice_dy.size());
  slice_forward(slice_x.data(), slice_y.data(), 2, 30, 5, 15);
  expect_close("slice_y", slice_y);
  expect_gradient("slice_dx", slice_x.size(),
                  [&](float* out, bool acc) { slice_backward(slice_dy.data(), out, 2, 30, 5, 15, acc); });

  // ---- layer norm over channels and over features ----
  struct NormCase {
    std::string name;
    const Vec &x, &w, &b, &dy;
    int64_t outer, c, inner;
    float eps;
  };
  for (const NormCase& ln : {NormCase{"lnc", lnc_x, lnc_w, lnc_b, lnc_dy, 2, 5, 12, 1e-6f},
                             NormCase{"lnf", lnf_x, lnf_w, lnf_b, lnf_dy, 14, 6, 1, 1e-5f}}) {
    Vec ly(ln.x.size()), mean(ln.outer * ln.inner), invstd(ln.outer * ln.inner);
    layernorm_forward(ln.x.data(), ln.w.data(), ln.b.data(), ly.data(), mean.data(), invstd.data(), ln.outer, ln.c,
                      ln.inner, ln.eps);
    expect_close(ln.name + "_y", ly);
    expect_gradient(ln.name + "_dx", ln.x.size(), [&](float* out, bool acc) {
      layernorm_backward_data(ln.x.data(), ln.w.data(), mean.data(), invstd.data(), ln.dy.data(), out, ln.outer,
                              ln.c, ln.inner, acc);
    });
    Vec dw(ln.c, 0.0f), db(ln.c, 0.0f);  // parameter gradients always accumulate
    layernorm_backward_params(ln.x.data(), mean.data(), invstd.data(), ln.dy.data(), dw.data(), db.data(), ln.outer,
                              ln.c, ln.inner);
    expect_close(ln.name + "_dw", dw);
    expect_close(ln.name + "_db", db);
  }

  // ---- matmul, plain and with b transposed; softmax ----
  for (const auto& [name, transpose] : {std::pair{std::string("mm"), false}, {std::string("mmt"), true}}) {
    const Vec& a = transpose ? mmt_a : mm_a;
    const Vec& b = transpose ? mmt_b : mm_b;
    const Vec& mdy = transpose ? mmt_dy : mm_dy;
    Vec my(mdy.size());
    matmul_forward(a.data(), b.data(), my.data(), 6, 4, 5, 3, transpose);
    expect_close(name + "_y", my);
    expect_gradient(name + "_da", a.size(), [&](float* out, bool acc) {
      matmul_backward_a(b.data(), mdy.data(), out, 6, 4, 5, 3, transpose, acc);
    });
    expect_gradient(name + "_db", b.size(), [&](float* out, bool acc) {
      matmul_backward_b(a.data(), mdy.data(), out, 6, 4, 5, 3, transpose, acc);
    });
  }
  Vec soft_y(softmax_x.size());
  softmax_forward(softmax_x.data(), soft_y.data(), 6, 7);
  expect_close("softmax_y", soft_y);
  expect_gradient("softmax_dx", softmax_x.size(),
                  [&](float* out, bool acc) { softmax_backward(soft_y.data(), softmax_dy.data(), out, 6, 7, acc); });

  // ---- attention: packed q | k | v, 2 heads of 4 ----
  {
    const float scale = 1.0f / std::sqrt(4.0f);
    Vec probs(2 * 2 * 5 * 5), ay(2 * 5 * 8), scratch(probs.size());
    const float* qkv = attp_qkv.data();
    attention_forward(qkv, qkv + 8, qkv + 16, probs.data(), ay.data(), 2, 2, 5, 5, 4, 24, 24, scale);
    expect_close("attp_y", ay);
    expect_close("attp_p", probs);
    expect_gradient("attp_dqkv", attp_qkv.size(), [&](float* out, bool acc) {
      attention_backward(qkv, qkv + 8, qkv + 16, probs.data(), attp_dy.data(), out, out + 8, out + 16,
                         scratch.data(), 2, 2, 5, 5, 4, 24, 24, scale, acc, acc, acc);
    });
  }
  // ---- attention: separate q (3 tokens), k and v (6 tokens), 4 heads of 2 ----
  {
    const float scale = 1.0f / std::sqrt(2.0f);
    Vec probs(2 * 4 * 3 * 6), ay(2 * 3 * 8), scratch(probs.size());
    attention_forward(atts_q.data(), atts_k.data(), atts_v.data(), probs.data(), ay.data(), 2, 4, 3, 6, 2, 8, 8,
                      scale);
    expect_close("atts_y", ay);
    auto backward = [&](float* dq, float* dk, float* dv, bool acc) {
      attention_backward(atts_q.data(), atts_k.data(), atts_v.data(), probs.data(), atts_dy.data(), dq, dk, dv,
                         scratch.data(), 2, 4, 3, 6, 2, 8, 8, scale, acc, acc, acc);
    };
    expect_gradient("atts_dq", atts_q.size(), [&](float* out, bool acc) { backward(out, nullptr, nullptr, acc); });
    expect_gradient("atts_dk", atts_k.size(), [&](float* out, bool acc) { backward(nullptr, out, nullptr, acc); });
    expect_gradient("atts_dv", atts_v.size(), [&](float* out, bool acc) { backward(nullptr, nullptr, out, acc); });
  }

  // ---- patch embedding (patch 4 over 9x8: a 2x2 grid), class token, position embedding ----
  {
    Vec workspace(2 * 4 * 3 * 16), py(2 * 4 * 5);
    patch_embed_forward(patch_x.data(), patch_w.data(), patch_b.data(), py.data(), workspace.data(), 2, 3, 9, 8, 4, 5);
    expect_close("patch_y", py);
    expect_gradient("patch_dx", patch_x.size(), [&](float* out, bool acc) {
      patch_embed_backward_data(patch_w.data(), patch_dy.data(), out, workspace.data(), 2, 3, 9, 8, 4, 5, acc);
    });
    Vec dw(patch_w.size(), 0.0f), db(5, 0.0f);
    patch_embed_backward_params(patch_x.data(), patch_dy.data(), dw.data(), db.data(), workspace.data(), 2, 3, 9, 8, 4,
                                5);
    expect_close("patch_dw", dw);
    expect_close("patch_db", db);
  }
  Vec ty(token_dy.size());
  class_token_forward(token_x.data(), token_t.data(), ty.data(), 2, 4, 3);
  expect_close("token_y", ty);
  expect_gradient("token_dx", token_x.size(),
                  [&](float* out, bool acc) { class_token_backward_data(token_dy.data(), out, 2, 4, 3, acc); });
  Vec dt(3, 0.0f);
  class_token_backward_param(token_dy.data(), dt.data(), 2, 4, 3);
  expect_close("token_dt", dt);
  Vec pos_y(pos_x.size());
  pos_embed_forward(pos_x.data(), pos_p.data(), pos_y.data(), 2, 15);
  expect_close("pos_y", pos_y);
  Vec dp(15, 0.0f);
  pos_embed_backward_param(pos_dy.data(), dp.data(), 2, 15);
  expect_close("pos_dp", dp);

  // ---- dilated and depthwise convolutions, through the dispatcher: dilated ones
  // by "direct" alone, depthwise ones by every algorithm that supports them ----
  for (const ConvCase& cc : convs) {
    const ConvShape& s = cc.shape;
    const bool dilated = conv_takes_general_path(s);
    if (dilated) {
      EXPECT_FALSE(conv_algo_supported(ConvAlgo::gemm, ConvDirection::forward, s)) << cc.name;
      EXPECT_FALSE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::forward, s)) << cc.name;
    }
    const Vec& cx = inputs_[cc.name + "_x"];
    const Vec& cw = inputs_[cc.name + "_w"];
    const Vec& cb = inputs_[cc.name + "_b"];
    const Vec& cdy = inputs_[cc.name + "_dy"];
    int algorithms = 0;
    for (ConvAlgo algo : kConvAlgos) {
      SCOPED_TRACE(conv_algo_name(algo));
      auto workspace = [&](ConvDirection d) {
        return std::vector<float>(conv_workspace_bytes(algo, d, s) / sizeof(float) + 1);
      };
      if (conv_algo_supported(algo, ConvDirection::forward, s)) {
        ++algorithms;
        std::vector<float> ws = workspace(ConvDirection::forward);
        Vec cy(s.y_elements(), std::numeric_limits<float>::quiet_NaN());
        conv_forward(algo, s, cx.data(), cw.data(), cb.data(), cy.data(), ws.data(), ws.size() * sizeof(float));
        expect_close(cc.name + "_y", cy);
      }
      if (conv_algo_supported(algo, ConvDirection::backward_data, s)) {
        std::vector<float> ws = workspace(ConvDirection::backward_data);
        expect_gradient(cc.name + "_dx", cx.size(), [&](float* out, bool acc) {
          conv_backward_data(algo, s, cw.data(), cdy.data(), out, ws.data(), ws.size() * sizeof(float), acc);
        });
      }
      if (conv_algo_supported(algo, ConvDirection::backward_filter, s)) {
        std::vector<float> ws = workspace(ConvDirection::backward_filter);
        expect_gradient(cc.name + "_dw", cw.size(), [&](float* out, bool acc) {
          conv_backward_filter(algo, s, cx.data(), cdy.data(), out, ws.data(), ws.size() * sizeof(float), acc);
        });
      }
    }
    EXPECT_GE(algorithms, dilated ? 1 : 2) << cc.name;
  }
}

}  // namespace
}  // namespace mplan::rt::cpu
