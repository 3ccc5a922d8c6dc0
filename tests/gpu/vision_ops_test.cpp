// The CUDA backend's vision-model ops (runtime/ops_activations.h,
// ops_channel.h, ops_normalization.h, ops_attention.h, ops_embeddings.h)
// against the CPU backend's kernels (runtime/cpu/*_kernels.h), on small random
// shapes with odd sizes (tails of the grid-stride loops): the activations (at
// the -3/+3 knees of hardswish and hardsigmoid, both GELU forms, clip at values
// exactly on its bounds), per-channel multiply (per sample and shared),
// adaptive average pooling (windows that do not divide the input, and
// upsampling), channel shuffle, slices at an offset, layer norm (both layouts),
// batched matmul (b and b^T), softmax (a row of large values), multi-head
// attention (separate q, k, v and a packed [q | k | v]) and the vision
// transformer's embeddings. Every gradient an op writes is checked written and
// accumulated, from a random starting buffer.

#include <cmath>
#include <iterator>
#include <string>
#include <utility>

#include "runtime/cpu/activation_kernels.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/channel_kernels.h"
#include "runtime/cpu/embedding_kernels.h"
#include "runtime/cpu/normalization_kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace mplan::gpu_test {
namespace {

const rt::Context kInline;  // no stream: each op has run when it returns

// ---- activations ------------------------------------------------------------------------------

// One activation through both backends; backward reads the input x, or the
// output y where the op's derivative is taken from it (sigmoid).
struct ActivationCase {
  const char* name;
  void (*cpu_forward)(const float* x, float* y, int64_t count);
  void (*gpu_forward)(const rt::Context& ctx, const float* x, float* y, int64_t count);
  void (*cpu_backward)(const float* in, const float* dy, float* dx, int64_t count, bool accumulate);
  void (*gpu_backward)(const rt::Context& ctx, const float* in, const float* dy, float* dx, int64_t count,
                       bool accumulate);
  bool backward_from_output;
};

const ActivationCase kActivations[] = {
    {"hardswish", rt::cpu::hardswish_forward, rt::hardswish_forward, rt::cpu::hardswish_backward,
     rt::hardswish_backward, false},
    {"hardsigmoid", rt::cpu::hardsigmoid_forward, rt::hardsigmoid_forward, rt::cpu::hardsigmoid_backward,
     rt::hardsigmoid_backward, false},
    {"silu", rt::cpu::silu_forward, rt::silu_forward, rt::cpu::silu_backward, rt::silu_backward, false},
    {"sigmoid", rt::cpu::sigmoid_forward, rt::sigmoid_forward, rt::cpu::sigmoid_backward, rt::sigmoid_backward,
     true},
    {"gelu (erf)", [](const float* x, float* y, int64_t count) { rt::cpu::gelu_forward(x, y, count, false); },
     [](const rt::Context& ctx, const float* x, float* y, int64_t count) {
       rt::gelu_forward(ctx, x, y, count, /*tanh_approximation=*/false);
     },
     [](const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
       rt::cpu::gelu_backward(x, dy, dx, count, false, accumulate);
     },
     [](const rt::Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
       rt::gelu_backward(ctx, x, dy, dx, count, /*tanh_approximation=*/false, accumulate);
     },
     false},
    {"gelu (tanh)", [](const float* x, float* y, int64_t count) { rt::cpu::gelu_forward(x, y, count, true); },
     [](const rt::Context& ctx, const float* x, float* y, int64_t count) {
       rt::gelu_forward(ctx, x, y, count, /*tanh_approximation=*/true);
     },
     [](const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
       rt::cpu::gelu_backward(x, dy, dx, count, true, accumulate);
     },
     [](const rt::Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
       rt::gelu_backward(ctx, x, dy, dx, count, /*tanh_approximation=*/true, accumulate);
     },
     false},
};

TEST(GpuVisionOps, ActivationsMatchCpuIncludingTheKnees) {
  MPLAN_REQUIRE_GPU();
  const int64_t count = 1000 + 3;
  std::vector<float> x = random_floats(count, 1, -5.0f, 5.0f);
  // hardswish's and hardsigmoid's knees, exactly and one float to either side.
  const float knees[] = {-3.0f, 3.0f, std::nextafter(-3.0f, -4.0f), std::nextafter(-3.0f, 0.0f),
                         std::nextafter(3.0f, 0.0f), std::nextafter(3.0f, 4.0f), 0.0f, -0.0f};
  for (size_t i = 0; i < std::size(knees); ++i) x[7 * i + 1] = knees[i];
  const auto dy = random_floats(count, 2);
  const DeviceBuffer gx(x), gdy(dy);
  for (const ActivationCase& f : kActivations) {
    SCOPED_TRACE(f.name);
    std::vector<float> y(count);
    f.cpu_forward(x.data(), y.data(), count);
    DeviceBuffer gy(count * sizeof(float));
    f.gpu_forward(kInline, gx.f32(), gy.f32(), count);
    EXPECT_TRUE(close(gy.download(count), y)) << "forward";
    // The backward from the CPU's y where it reads y, so each direction is checked on its own.
    const std::vector<float>& in = f.backward_from_output ? y : x;
    const DeviceBuffer gin(in);
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(count, 3);
      DeviceBuffer gdx(expected);
      f.cpu_backward(in.data(), dy.data(), expected.data(), count, accumulate);
      f.gpu_backward(kInline, gin.f32(), gdy.f32(), gdx.f32(), count, accumulate);
      EXPECT_TRUE(close(gdx.download(count), expected)) << "backward, accumulate " << accumulate;
    }
  }
}

TEST(GpuVisionOps, ClipMatchesCpuOnAndBeyondItsBounds) {
  MPLAN_REQUIRE_GPU();
  const int64_t count = 1000 + 3;
  const auto dy = random_floats(count, 2);
  const DeviceBuffer gdy(dy);
  for (const auto& [low, high] : {std::pair{0.0f, 6.0f}, std::pair{-1.0f, 1.0f}}) {  // ReLU6, hardtanh
    SCOPED_TRACE("clip to [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    std::vector<float> x = random_floats(count, 1, -8.0f, 8.0f);
    // Inputs exactly on the bounds (y there is the bound: no gradient), and just inside.
    const float edges[] = {low, high, std::nextafter(low, high), std::nextafter(high, low)};
    for (size_t i = 0; i < std::size(edges); ++i) x[11 * i + 2] = edges[i];
    std::vector<float> y(count);
    rt::cpu::clip_forward(x.data(), y.data(), count, low, high);
    const DeviceBuffer gx(x);
    DeviceBuffer gy(count * sizeof(float));
    rt::clip_forward(kInline, gx.f32(), gy.f32(), count, low, high);
    EXPECT_TRUE(close(gy.download(count), y)) << "forward";
    const DeviceBuffer gy_cpu(y);  // the backward reads y: the CPU's
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(count, 3);
      DeviceBuffer gdx(expected);
      rt::cpu::clip_backward(y.data(), dy.data(), expected.data(), count, low, high, accumulate);
      rt::clip_backward(kInline, gy_cpu.f32(), gdy.f32(), gdx.f32(), count, low, high, accumulate);
      EXPECT_TRUE(close(gdx.download(count), expected)) << "backward, accumulate " << accumulate;
    }
  }
}

// ---- channel ops ------------------------------------------------------------------------------

TEST(GpuVisionOps, ChannelMulMatchesCpuPerSampleAndShared) {
  MPLAN_REQUIRE_GPU();
  struct Shape {
    int64_t n, c, inner;
  };
  // squeeze-and-excitation (inner = H*W), and an element-wise product (inner = 1)
  for (const Shape& s : {Shape{3, 5, 37}, Shape{2, 67, 1}})
    for (bool per_sample : {true, false}) {
      SCOPED_TRACE("n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " inner=" + std::to_string(s.inner) +
                   (per_sample ? ", s per sample" : ", s shared"));
      const int64_t all = s.n * s.c * s.inner, factors = per_sample ? s.n * s.c : s.c;
      const auto x = random_floats(all, 1), scale = random_floats(factors, 2, -2.0f, 2.0f), dy = random_floats(all, 3);
      const DeviceBuffer gx(x), gs(scale), gdy(dy);
      {
        std::vector<float> y(all);
        rt::cpu::channel_mul_forward(x.data(), scale.data(), y.data(), s.n, s.c, s.inner, per_sample);
        DeviceBuffer gy(all * sizeof(float));
        rt::channel_mul_forward(kInline, gx.f32(), gs.f32(), gy.f32(), s.n, s.c, s.inner, per_sample);
        EXPECT_TRUE(close(gy.download(all), y)) << "forward";
      }
      for (bool accumulate : {false, true}) {
        std::vector<float> expected = random_floats(all, 4);
        DeviceBuffer gdx(expected);
        rt::cpu::channel_mul_backward_x(scale.data(), dy.data(), expected.data(), s.n, s.c, s.inner, per_sample,
                                        accumulate);
        rt::channel_mul_backward_x(kInline, gs.f32(), gdy.f32(), gdx.f32(), s.n, s.c, s.inner, per_sample, accumulate);
        EXPECT_TRUE(close(gdx.download(all), expected)) << "backward x, accumulate " << accumulate;
      }
      for (bool accumulate : {false, true}) {
        std::vector<float> expected = random_floats(factors, 5);
        DeviceBuffer gds(expected);
        rt::cpu::channel_mul_backward_s(x.data(), dy.data(), expected.data(), s.n, s.c, s.inner, per_sample,
                                        accumulate);
        rt::channel_mul_backward_s(kInline, gx.f32(), gdy.f32(), gds.f32(), s.n, s.c, s.inner, per_sample, accumulate);
        EXPECT_TRUE(close(gds.download(factors), expected)) << "backward s, accumulate " << accumulate;
      }
    }
}

TEST(GpuVisionOps, AdaptiveAvgPoolMatchesCpuOnUnevenWindowsAndUpsampling) {
  MPLAN_REQUIRE_GPU();
  struct Shape {
    int64_t h, w, out_h, out_w;
  };
  const Shape shapes[] = {
      {7, 7, 3, 3},   // windows of 3 that overlap by one: rows 0-2, 2-4, 4-6
      {9, 10, 4, 3},  // rectangular, neither divides
      {5, 5, 7, 7},   // upsampling: windows of one or two that repeat input cells
      {6, 5, 1, 1},   // global
      {7, 7, 7, 7},   // identity
  };
  const int64_t planes = 2 * 3 + 1;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(std::to_string(s.h) + "x" + std::to_string(s.w) + " -> " + std::to_string(s.out_h) + "x" +
                 std::to_string(s.out_w));
    const int64_t in = planes * s.h * s.w, out = planes * s.out_h * s.out_w;
    const auto x = random_floats(in, 1), dy = random_floats(out, 2);
    std::vector<float> y(out);
    rt::cpu::adaptive_avg_pool_forward(x.data(), y.data(), planes, s.h, s.w, s.out_h, s.out_w);
    const DeviceBuffer gx(x), gdy(dy);
    DeviceBuffer gy(out * sizeof(float));
    rt::adaptive_avg_pool_forward(kInline, gx.f32(), gy.f32(), planes, s.h, s.w, s.out_h, s.out_w);
    EXPECT_TRUE(close(gy.download(out), y)) << "forward";
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(in, 3);
      DeviceBuffer gdx(expected);
      rt::cpu::adaptive_avg_pool_backward(dy.data(), expected.data(), planes, s.h, s.w, s.out_h, s.out_w, accumulate);
      rt::adaptive_avg_pool_backward(kInline, gdy.f32(), gdx.f32(), planes, s.h, s.w, s.out_h, s.out_w, accumulate);
      EXPECT_TRUE(close(gdx.download(in), expected)) << "backward, accumulate " << accumulate;
    }
  }
}

TEST(GpuVisionOps, ChannelShuffleMatchesCpuAndItsInverse) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 2, c = 15, inner = 13, all = n * c * inner;
  const auto x = random_floats(all, 1);
  const DeviceBuffer gx(x);
  for (int64_t groups : {3, 5}) {  // the forward's shuffle with 3 groups and its backward (c/3 = 5 groups)
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(all, 2);
      DeviceBuffer gy(expected);
      rt::cpu::channel_shuffle(x.data(), expected.data(), n, c, inner, groups, accumulate);
      rt::channel_shuffle(kInline, gx.f32(), gy.f32(), n, c, inner, groups, accumulate);
      EXPECT_TRUE(close(gy.download(all), expected)) << groups << " groups, accumulate " << accumulate;
    }
  }
  // Shuffling with 3 groups, then with 5, gives x back: the backward is the inverse.
  DeviceBuffer shuffled(all * sizeof(float)), back(all * sizeof(float));
  rt::channel_shuffle(kInline, gx.f32(), shuffled.f32(), n, c, inner, 3, false);
  rt::channel_shuffle(kInline, shuffled.f32(), back.f32(), n, c, inner, 5, false);
  EXPECT_EQ(back.download(all), x);
}

TEST(GpuVisionOps, SliceMatchesCpuAtAnOffset) {
  MPLAN_REQUIRE_GPU();
  const int64_t outer = 5, x_cols = 37;
  struct Part {
    int64_t offset, y_cols;
  };
  // the first part, one in the middle, the last (torch.chunk's pieces)
  for (const Part& p : {Part{0, 13}, Part{11, 17}, Part{24, 13}}) {
    SCOPED_TRACE("columns " + std::to_string(p.offset) + " .. " + std::to_string(p.offset + p.y_cols - 1) + " of " +
                 std::to_string(x_cols));
    const int64_t in = outer * x_cols, out = outer * p.y_cols;
    const auto x = random_floats(in, 1), dy = random_floats(out, 2);
    std::vector<float> y(out);
    rt::cpu::slice_forward(x.data(), y.data(), outer, x_cols, p.offset, p.y_cols);
    const DeviceBuffer gx(x), gdy(dy);
    DeviceBuffer gy(out * sizeof(float));
    rt::slice_forward(kInline, gx.f32(), gy.f32(), outer, x_cols, p.offset, p.y_cols);
    EXPECT_TRUE(close(gy.download(out), y)) << "forward";
    // Written: zero outside the slice; accumulated: the rest of dx as it was.
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(in, 3);
      DeviceBuffer gdx(expected);
      rt::cpu::slice_backward(dy.data(), expected.data(), outer, x_cols, p.offset, p.y_cols, accumulate);
      rt::slice_backward(kInline, gdy.f32(), gdx.f32(), outer, x_cols, p.offset, p.y_cols, accumulate);
      EXPECT_TRUE(close(gdx.download(in), expected)) << "backward, accumulate " << accumulate;
    }
  }
}

// ---- layer norm -------------------------------------------------------------------------------

void check_layernorm(int64_t outer, int64_t c, int64_t inner) {
  SCOPED_TRACE("layer norm outer=" + std::to_string(outer) + " c=" + std::to_string(c) +
               " inner=" + std::to_string(inner));
  const int64_t all = outer * c * inner, positions = outer * inner;
  const float eps = 1e-6f;
  const auto x = random_floats(all, 1, -0.7f, 1.9f), gamma = random_floats(c, 2, 0.5f, 1.5f),
             beta = random_floats(c, 3), dy = random_floats(all, 4);
  std::vector<float> y(all), mean(positions), invstd(positions);
  rt::cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(), outer, c,
                             inner, eps);
  const DeviceBuffer gx(x), ggamma(gamma), gbeta(beta), gdy(dy);
  {
    DeviceBuffer gy(all * sizeof(float)), gmean(positions * sizeof(float)), ginvstd(positions * sizeof(float));
    rt::layernorm_forward(kInline, gx.f32(), ggamma.f32(), gbeta.f32(), gy.f32(), gmean.f32(), ginvstd.f32(), outer,
                          c, inner, eps);
    EXPECT_TRUE(close(gy.download(all), y)) << "y";
    EXPECT_TRUE(close(gmean.download(positions), mean)) << "saved mean";
    EXPECT_TRUE(close(ginvstd.download(positions), invstd)) << "saved 1/std";
  }
  // The backward from the CPU's statistics, so each op is checked on its own.
  const DeviceBuffer smean(mean), sinvstd(invstd);
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(all, 5);
    DeviceBuffer gdx(expected);
    rt::cpu::layernorm_backward_data(x.data(), gamma.data(), mean.data(), invstd.data(), dy.data(), expected.data(),
                                     outer, c, inner, accumulate);
    rt::layernorm_backward_data(kInline, gx.f32(), ggamma.f32(), smean.f32(), sinvstd.f32(), gdy.f32(), gdx.f32(),
                                outer, c, inner, accumulate);
    EXPECT_TRUE(close(gdx.download(all), expected)) << "backward data, accumulate " << accumulate;
  }
  {
    std::vector<float> dgamma = random_floats(c, 6), dbeta = random_floats(c, 7);
    DeviceBuffer gdgamma(dgamma), gdbeta(dbeta);
    rt::cpu::layernorm_backward_params(x.data(), mean.data(), invstd.data(), dy.data(), dgamma.data(), dbeta.data(),
                                       outer, c, inner);
    rt::layernorm_backward_params(kInline, gx.f32(), smean.f32(), sinvstd.f32(), gdy.f32(), gdgamma.f32(),
                                  gdbeta.f32(), outer, c, inner);
    EXPECT_TRUE(close(gdgamma.download(c), dgamma)) << "dgamma (accumulating)";
    EXPECT_TRUE(close(gdbeta.download(c), dbeta)) << "dbeta (accumulating)";
  }
}

TEST(GpuVisionOps, LayerNormMatchesCpuOverFeaturesAndOverChannels) {
  MPLAN_REQUIRE_GPU();
  check_layernorm(/*outer=*/7, /*c=*/37, /*inner=*/1);  // [T, D]: ViT's LayerNorm
  check_layernorm(/*outer=*/2, /*c=*/5, /*inner=*/33);  // [C, H, W]: ConvNeXt's LayerNorm2d
  // More positions than a parameter-gradient block has threads (1024), in both layouts.
  check_layernorm(/*outer=*/1500, /*c=*/24, /*inner=*/1);
  check_layernorm(/*outer=*/3, /*c=*/6, /*inner=*/700);
}

// ---- matmul, softmax, attention ------------------------------------------------------------------

TEST(GpuVisionOps, MatmulMatchesCpuWithAndWithoutTransposedB) {
  MPLAN_REQUIRE_GPU();
  const int64_t batch = 3, m = 5, k = 7, n = 9;
  const auto a = random_floats(batch * m * k, 1), b = random_floats(batch * k * n, 2),
             dy = random_floats(batch * m * n, 3);
  const DeviceBuffer ga(a), gb(b), gdy(dy);
  for (bool transpose_b : {false, true}) {  // b (batch, k, n), or (batch, n, k) used as its transpose
    SCOPED_TRACE(transpose_b ? "a @ b^T" : "a @ b");
    {
      std::vector<float> y(batch * m * n);
      rt::cpu::matmul_forward(a.data(), b.data(), y.data(), batch, m, k, n, transpose_b);
      DeviceBuffer gy(y.size() * sizeof(float));
      rt::matmul_forward(kInline, ga.f32(), gb.f32(), gy.f32(), batch, m, k, n, transpose_b);
      EXPECT_TRUE(close(gy.download(y.size()), y)) << "forward";
    }
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(batch * m * k, 4);
      DeviceBuffer gda(expected);
      rt::cpu::matmul_backward_a(b.data(), dy.data(), expected.data(), batch, m, k, n, transpose_b, accumulate);
      rt::matmul_backward_a(kInline, gb.f32(), gdy.f32(), gda.f32(), batch, m, k, n, transpose_b, accumulate);
      EXPECT_TRUE(close(gda.download(expected.size()), expected)) << "backward a, accumulate " << accumulate;
    }
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = random_floats(batch * k * n, 5);
      DeviceBuffer gdb(expected);
      rt::cpu::matmul_backward_b(a.data(), dy.data(), expected.data(), batch, m, k, n, transpose_b, accumulate);
      rt::matmul_backward_b(kInline, ga.f32(), gdy.f32(), gdb.f32(), batch, m, k, n, transpose_b, accumulate);
      EXPECT_TRUE(close(gdb.download(expected.size()), expected)) << "backward b, accumulate " << accumulate;
    }
  }
}

TEST(GpuVisionOps, SoftmaxMatchesCpuOnRowsOfLargeValues) {
  MPLAN_REQUIRE_GPU();
  const int64_t rows = 6, cols = 37, all = rows * cols;
  std::vector<float> x = random_floats(all, 1, -3.0f, 3.0f);
  // exp(100) overflows a float: only the subtraction of the row's maximum keeps these finite.
  for (int64_t j = 0; j < cols; ++j) {
    x[2 * cols + j] = 80.0f + 20.0f * static_cast<float>(j) / static_cast<float>(cols - 1);  // 80 .. 100
    x[3 * cols + j] = -100.0f + static_cast<float>(j % 5);                                  // all very negative
    x[4 * cols + j] = 1.5f;                                                                 // all equal: uniform
  }
  const auto dy = random_floats(all, 2);
  std::vector<float> y(all);
  rt::cpu::softmax_forward(x.data(), y.data(), rows, cols);
  const DeviceBuffer gx(x), gdy(dy);
  DeviceBuffer gy(all * sizeof(float));
  rt::softmax_forward(kInline, gx.f32(), gy.f32(), rows, cols);
  EXPECT_TRUE(close(gy.download(all), y)) << "forward";
  const DeviceBuffer gy_cpu(y);
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(all, 3);
    DeviceBuffer gdx(expected);
    rt::cpu::softmax_backward(y.data(), dy.data(), expected.data(), rows, cols, accumulate);
    rt::softmax_backward(kInline, gy_cpu.f32(), gdy.f32(), gdx.f32(), rows, cols, accumulate);
    EXPECT_TRUE(close(gdx.download(all), expected)) << "backward, accumulate " << accumulate;
  }
}

// Multi-head attention through both backends: q (n, tq, q_stride), k and v
// (n, tk, kv_stride) at offsets q_at, k_at, v_at of their buffers (a packed
// [q | k | v] is one buffer); the gradients in the same layout.
struct AttentionCase {
  const char* name;
  int64_t n, heads, tq, tk, head_dim;
  bool packed;  // q, k, v (and dq, dk, dv) one buffer (n, t, 3D); else three, strides D
};

void check_attention(const AttentionCase& a) {
  SCOPED_TRACE(a.name);
  const int64_t dim = a.heads * a.head_dim, q_stride = a.packed ? 3 * dim : dim, kv_stride = q_stride;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  // Buffers and the offsets of q, k, v in them: one packed buffer, or three.
  const int64_t q_size = a.n * a.tq * q_stride, kv_size = a.n * a.tk * kv_stride;
  const int64_t k_at = a.packed ? dim : 0, v_at = a.packed ? 2 * dim : 0;
  const auto q = random_floats(q_size, 1, -2.0f, 2.0f);
  const auto k = a.packed ? q : random_floats(kv_size, 2, -2.0f, 2.0f);
  const auto v = a.packed ? q : random_floats(kv_size, 3);
  const int64_t probs_size = a.n * a.heads * a.tq * a.tk, y_size = a.n * a.tq * dim;
  std::vector<float> probs(probs_size), y(y_size);
  rt::cpu::attention_forward(q.data(), k.data() + k_at, v.data() + v_at, probs.data(), y.data(), a.n, a.heads, a.tq,
                             a.tk, a.head_dim, q_stride, kv_stride, scale);
  const DeviceBuffer gq(q), gk(k), gv(v);
  {
    DeviceBuffer gprobs(probs_size * sizeof(float)), gy(y_size * sizeof(float));
    rt::attention_forward(kInline, gq.f32(), gk.f32() + k_at, gv.f32() + v_at, gprobs.f32(), gy.f32(), a.n, a.heads,
                          a.tq, a.tk, a.head_dim, q_stride, kv_stride, scale);
    EXPECT_TRUE(close(gprobs.download(probs_size), probs)) << "forward: the attention matrix";
    EXPECT_TRUE(close(gy.download(y_size), y)) << "forward: y";
  }
  // The backward from the CPU's probabilities.
  const auto dy = random_floats(y_size, 4);
  const DeviceBuffer gprobs(probs), gdy(dy);
  struct Flags {
    bool q, k, v;
  };
  for (const Flags& f : {Flags{false, false, false}, Flags{true, true, true}, Flags{false, true, false}}) {
    SCOPED_TRACE(std::string("accumulate dq ") + (f.q ? "1" : "0") + ", dk " + (f.k ? "1" : "0") + ", dv " +
                 (f.v ? "1" : "0"));
    std::vector<float> dq = random_floats(q_size, 5);
    std::vector<float> dk = a.packed ? dq : random_floats(kv_size, 6);
    std::vector<float> dv = a.packed ? dq : random_floats(kv_size, 7);
    std::vector<float> scratch(probs_size);
    DeviceBuffer gdq(dq), gdk(dk), gdv(dv), gscratch(probs_size * sizeof(float));
    // Packed: the three gradients are columns of one buffer, dq's.
    float* cdq = dq.data();
    float* cdk = a.packed ? dq.data() + k_at : dk.data();
    float* cdv = a.packed ? dq.data() + v_at : dv.data();
    float* gpu_dk = a.packed ? gdq.f32() + k_at : gdk.f32();
    float* gpu_dv = a.packed ? gdq.f32() + v_at : gdv.f32();
    rt::cpu::attention_backward(q.data(), k.data() + k_at, v.data() + v_at, probs.data(), dy.data(), cdq, cdk, cdv,
                                scratch.data(), a.n, a.heads, a.tq, a.tk, a.head_dim, q_stride, kv_stride, scale, f.q,
                                f.k, f.v);
    rt::attention_backward(kInline, gq.f32(), gk.f32() + k_at, gv.f32() + v_at, gprobs.f32(), gdy.f32(), gdq.f32(),
                           gpu_dk, gpu_dv, gscratch.f32(), a.n, a.heads, a.tq, a.tk, a.head_dim, q_stride, kv_stride,
                           scale, f.q, f.k, f.v);
    if (a.packed) {
      EXPECT_TRUE(close(gdq.download(q_size), dq)) << "dq | dk | dv, packed";
    } else {
      EXPECT_TRUE(close(gdq.download(q_size), dq)) << "dq";
      EXPECT_TRUE(close(gdk.download(kv_size), dk)) << "dk";
      EXPECT_TRUE(close(gdv.download(kv_size), dv)) << "dv";
    }
  }
  {  // Only dq wanted (dk, dv null): k and v are not trained.
    std::vector<float> dq = random_floats(q_size, 8), scratch(probs_size);
    DeviceBuffer gdq(dq), gscratch(probs_size * sizeof(float));
    rt::cpu::attention_backward(q.data(), k.data() + k_at, v.data() + v_at, probs.data(), dy.data(), dq.data(),
                                nullptr, nullptr, scratch.data(), a.n, a.heads, a.tq, a.tk, a.head_dim, q_stride,
                                kv_stride, scale, false, false, false);
    rt::attention_backward(kInline, gq.f32(), gk.f32() + k_at, gv.f32() + v_at, gprobs.f32(), gdy.f32(), gdq.f32(),
                           nullptr, nullptr, gscratch.f32(), a.n, a.heads, a.tq, a.tk, a.head_dim, q_stride, kv_stride,
                           scale, false, false, false);
    EXPECT_TRUE(close(gdq.download(q_size), dq)) << "dq alone (written; packed: the k and v columns kept)";
  }
}

// The API has no causal mask (ops_attention.h): every query attends to every key.
TEST(GpuVisionOps, AttentionMatchesCpuSeparateAndPacked) {
  MPLAN_REQUIRE_GPU();
  check_attention({"separate q, k, v; cross-attention tq != tk", /*n=*/2, /*heads=*/3, /*tq=*/7, /*tk=*/9,
                   /*head_dim=*/5, /*packed=*/false});
  check_attention({"packed [q | k | v], strides 3D (ViT's in-projection)", /*n=*/2, /*heads=*/3, /*tq=*/11,
                   /*tk=*/11, /*head_dim=*/5, /*packed=*/true});
  check_attention({"one head, one sample", /*n=*/1, /*heads=*/1, /*tq=*/13, /*tk=*/13, /*head_dim=*/8,
                   /*packed=*/false});
}

// ---- vision transformer embeddings ------------------------------------------------------------

TEST(GpuVisionOps, PatchEmbedMatchesCpuWithRowsAndColumnsPastTheLastPatch) {
  MPLAN_REQUIRE_GPU();
  // 11 x 9 with patches of 4: a 2 x 2 grid; rows 8-10 and column 8 belong to no patch.
  const int64_t n = 2, c = 3, height = 11, width = 9, patch = 4, out = 5;
  const int64_t tokens = (height / patch) * (width / patch), row = c * patch * patch;
  const int64_t x_size = n * c * height * width, y_size = n * tokens * out, w_size = out * row;
  const auto x = random_floats(x_size, 1), w = random_floats(w_size, 2), bias = random_floats(out, 3),
             dy = random_floats(y_size, 4);
  const DeviceBuffer gx(x), gw(w), gbias(bias), gdy(dy);
  std::vector<float> workspace(n * tokens * row);
  DeviceBuffer gworkspace(workspace.size() * sizeof(float));
  for (bool with_bias : {true, false}) {
    std::vector<float> y(y_size);
    rt::cpu::patch_embed_forward(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), workspace.data(), n,
                                 c, height, width, patch, out);
    DeviceBuffer gy(y_size * sizeof(float));
    rt::patch_embed_forward(kInline, gx.f32(), gw.f32(), with_bias ? gbias.f32() : nullptr, gy.f32(),
                            gworkspace.f32(), n, c, height, width, patch, out);
    EXPECT_TRUE(close(gy.download(y_size), y)) << "forward, bias " << with_bias;
  }
  // Written: zero where no patch reads x; accumulated: kept there.
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(x_size, 5);
    DeviceBuffer gdx(expected);
    rt::cpu::patch_embed_backward_data(w.data(), dy.data(), expected.data(), workspace.data(), n, c, height, width,
                                       patch, out, accumulate);
    rt::patch_embed_backward_data(kInline, gw.f32(), gdy.f32(), gdx.f32(), gworkspace.f32(), n, c, height, width,
                                  patch, out, accumulate);
    EXPECT_TRUE(close(gdx.download(x_size), expected)) << "backward data, accumulate " << accumulate;
  }
  for (bool with_bias : {true, false}) {
    std::vector<float> dw = random_floats(w_size, 6), dbias = random_floats(out, 7);
    DeviceBuffer gdw(dw), gdbias(dbias);
    rt::cpu::patch_embed_backward_params(x.data(), dy.data(), dw.data(), with_bias ? dbias.data() : nullptr,
                                         workspace.data(), n, c, height, width, patch, out);
    rt::patch_embed_backward_params(kInline, gx.f32(), gdy.f32(), gdw.f32(), with_bias ? gdbias.f32() : nullptr,
                                    gworkspace.f32(), n, c, height, width, patch, out);
    EXPECT_TRUE(close(gdw.download(w_size), dw)) << "dw (accumulating), bias " << with_bias;
    EXPECT_TRUE(close(gdbias.download(out), dbias)) << "dbias (accumulating; untouched without a bias)";
  }
}

TEST(GpuVisionOps, ClassTokenAndPositionEmbeddingMatchCpu) {
  MPLAN_REQUIRE_GPU();
  const int64_t n = 3, tokens = 10, dim = 7;
  const int64_t x_size = n * tokens * dim, y_size = n * (tokens + 1) * dim;
  const auto x = random_floats(x_size, 1), token = random_floats(dim, 2), dy = random_floats(y_size, 3);
  const DeviceBuffer gx(x), gtoken(token), gdy(dy);
  {
    std::vector<float> y(y_size);
    rt::cpu::class_token_forward(x.data(), token.data(), y.data(), n, tokens, dim);
    DeviceBuffer gy(y_size * sizeof(float));
    rt::class_token_forward(kInline, gx.f32(), gtoken.f32(), gy.f32(), n, tokens, dim);
    EXPECT_TRUE(close(gy.download(y_size), y)) << "class token: forward";
  }
  for (bool accumulate : {false, true}) {
    std::vector<float> expected = random_floats(x_size, 4);
    DeviceBuffer gdx(expected);
    rt::cpu::class_token_backward_data(dy.data(), expected.data(), n, tokens, dim, accumulate);
    rt::class_token_backward_data(kInline, gdy.f32(), gdx.f32(), n, tokens, dim, accumulate);
    EXPECT_TRUE(close(gdx.download(x_size), expected)) << "class token: backward data, accumulate " << accumulate;
  }
  {
    std::vector<float> expected = random_floats(dim, 5);
    DeviceBuffer gdtoken(expected);
    rt::cpu::class_token_backward_param(dy.data(), expected.data(), n, tokens, dim);
    rt::class_token_backward_param(kInline, gdy.f32(), gdtoken.f32(), n, tokens, dim);
    EXPECT_TRUE(close(gdtoken.download(dim), expected)) << "class token: dtoken (accumulating)";
  }
  // The position embedding over the sequence with its class token: (tokens + 1) * dim per sample.
  const int64_t count = (tokens + 1) * dim;
  const auto p = random_floats(count, 6);
  const DeviceBuffer gp(p);
  {
    std::vector<float> y(y_size);
    rt::cpu::pos_embed_forward(dy.data(), p.data(), y.data(), n, count);
    DeviceBuffer gy(y_size * sizeof(float));
    rt::pos_embed_forward(kInline, gdy.f32(), gp.f32(), gy.f32(), n, count);
    EXPECT_TRUE(close(gy.download(y_size), y)) << "position embedding: forward";
  }
  {
    std::vector<float> expected = random_floats(count, 7);
    DeviceBuffer gdp(expected);
    rt::cpu::pos_embed_backward_param(dy.data(), expected.data(), n, count);
    rt::pos_embed_backward_param(kInline, gdy.f32(), gdp.f32(), n, count);
    EXPECT_TRUE(close(gdp.download(count), expected)) << "position embedding: dp (accumulating)";
  }
}

}  // namespace
}  // namespace mplan::gpu_test
