// Every convolution algorithm agrees with "direct" in every direction it offers,
// fits in the workspace it declares, honours `accumulate`, and the micro-batched
// convolution equals the undivided one (mu-cuDNN §II).

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/poison.h"
#include "runtime/cpu/conv_kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;
using test::relative_max_diff;

struct NamedShape {
  const char* name;
  ConvShape shape;
};

// n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups
std::vector<NamedShape> shapes() {
  return {
      {"3x3 pad1", {3, 4, 7, 6, 5, 3, 3, 1, 1, 1, 1, 1}},
      {"3x3 pad0 odd", {2, 3, 9, 8, 4, 3, 3, 1, 1, 0, 0, 1}},
      {"3x3 pad2", {2, 2, 5, 5, 3, 3, 3, 1, 1, 2, 2, 1}},
      {"3x3 groups2", {2, 6, 6, 7, 4, 3, 3, 1, 1, 1, 1, 2}},
      {"3x3 depthwise", {2, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, 4}},
      {"3x3 stride2", {2, 3, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1}},
      {"5x5 stride2 pad2 groups2", {2, 4, 11, 10, 6, 5, 5, 2, 2, 2, 2, 2}},
      {"1x1", {3, 8, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1}},
      {"7x5 stride(2,3) pad(3,1)", {2, 3, 12, 11, 4, 7, 5, 2, 3, 3, 1, 1}},
      {"alexnet-conv1-like 11x11 s4", {1, 3, 31, 31, 4, 11, 11, 4, 4, 2, 2, 1}},
      {"3x3 pad3 (winograd forward only)", {2, 2, 4, 4, 3, 3, 3, 1, 1, 3, 3, 1}},
      {"3x3 depthwise stride2 multiplier2", {2, 3, 9, 8, 6, 3, 3, 2, 2, 1, 1, 3}},
      // tiled_gemm: depth 360 > one 256-deep block, 100 output channels > one 96-row block.
      {"3x3 deep and wide", {2, 40, 9, 10, 100, 3, 3, 1, 1, 1, 1, 1}},
      // Grids of a multiple of 32 pixels per image: tiled_gemm packs whole 32-pixel
      // panels of one image with masked loads where the CPU has AVX-512.
      {"3x3 8x8", {2, 5, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1}},
      {"5x5 pad2 16x8", {3, 6, 16, 8, 10, 5, 5, 1, 1, 2, 2, 1}},
  };
}

constexpr ConvDirection kDirections[] = {ConvDirection::forward, ConvDirection::backward_data,
                                         ConvDirection::backward_filter};

// Runs one direction, with the output prefilled (so `accumulate` matters) and a
// workspace followed by poisoned guard bytes.
std::vector<float> run(ConvAlgo algo, ConvDirection dir, const ConvShape& sh,
                       const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& dy, const std::vector<float>& initial,
                       bool accumulate, size_t* guard_damage) {
  const size_t ws_bytes = conv_workspace_bytes(algo, dir, sh);
  const size_t guard_bytes = 256;
  std::vector<std::byte> workspace(ws_bytes + guard_bytes);
  for (size_t i = 0; i + 4 <= guard_bytes; i += 4) std::memcpy(workspace.data() + ws_bytes + i, &kPoisonBits, 4);
  std::vector<float> out = initial;
  switch (dir) {
    case ConvDirection::forward:
      conv_forward(algo, sh, x.data(), w.data(), nullptr, out.data(), workspace.data(), ws_bytes,
                   accumulate);
      break;
    case ConvDirection::backward_data:
      conv_backward_data(algo, sh, w.data(), dy.data(), out.data(), workspace.data(), ws_bytes,
                         accumulate);
      break;
    case ConvDirection::backward_filter:
      conv_backward_filter(algo, sh, x.data(), dy.data(), out.data(), workspace.data(), ws_bytes,
                           accumulate);
      break;
  }
  std::vector<float> guard(guard_bytes / 4);
  std::memcpy(guard.data(), workspace.data() + ws_bytes, guard_bytes);
  *guard_damage = guard.size() - count_poison(guard.data(), guard.size());
  return out;
}

size_t output_elements(ConvDirection dir, const ConvShape& sh) {
  switch (dir) {
    case ConvDirection::forward: return sh.y_elements();
    case ConvDirection::backward_data: return sh.x_elements();
    case ConvDirection::backward_filter: return sh.w_elements();
  }
  return 0;
}

TEST(Conv, EveryAlgorithmAgreesWithDirectInEveryDirection) {
  int compared = 0;
  for (const NamedShape& named : shapes()) {
    const ConvShape& sh = named.shape;
    ASSERT_TRUE(sh.valid()) << named.name;
    auto x = random_vector(sh.x_elements(), 1);
    auto w = random_vector(sh.w_elements(), 2);
    auto dy = random_vector(sh.y_elements(), 3);
    for (ConvDirection dir : kDirections) {
      auto initial = random_vector(output_elements(dir, sh), 4);
      size_t damage = 0;
      auto reference = run(ConvAlgo::direct, dir, sh, x, w, dy, initial, false, &damage);
      auto reference_acc = run(ConvAlgo::direct, dir, sh, x, w, dy, initial, true, &damage);
      for (ConvAlgo algo : kConvAlgos) {
        if (!conv_algo_supported(algo, dir, sh)) continue;
        for (bool accumulate : {false, true}) {
          auto out = run(algo, dir, sh, x, w, dy, initial, accumulate, &damage);
          double diff = relative_max_diff(out, accumulate ? reference_acc : reference);
          EXPECT_LE(diff, 1e-5) << named.name << " " << conv_algo_name(algo) << " "
                                << conv_direction_name(dir) << " accumulate=" << accumulate
                                << ": max relative diff " << diff;
          EXPECT_EQ(damage, 0u) << named.name << " " << conv_algo_name(algo) << " "
                                << conv_direction_name(dir)
                                << ": wrote past its declared workspace";
          ++compared;
        }
      }
    }
  }
  // direct, gemm, tiled_gemm and tiled_gemm_small: 3 directions x 15 shapes;
  // winograd forward: the 8 stride-1 3x3 shapes; winograd backward-data: those 7
  // with pad <= 2. Each with both flags.
  EXPECT_EQ(compared, 2 * (15 * 3 * 4 + 8 + 7));
}

TEST(Conv, AccumulateAddsToTheOutput) {
  ConvShape sh{2, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 2};
  auto x = random_vector(sh.x_elements(), 5), w = random_vector(sh.w_elements(), 6);
  auto dy = random_vector(sh.y_elements(), 7);
  for (ConvDirection dir : kDirections) {
    std::vector<float> zero(output_elements(dir, sh), 0.0f);
    auto initial = random_vector(output_elements(dir, sh), 8);
    size_t damage;
    auto fresh = run(ConvAlgo::direct, dir, sh, x, w, dy, initial, false, &damage);
    auto added = run(ConvAlgo::direct, dir, sh, x, w, dy, initial, true, &damage);
    for (size_t i = 0; i < fresh.size(); ++i)
      ASSERT_NEAR(added[i], fresh[i] + initial[i], 1e-5) << conv_direction_name(dir) << " at " << i;
  }
}

TEST(Conv, WinogradSupportFollowsItsShapeLimits) {
  ConvShape three{1, 2, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1};
  EXPECT_TRUE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::forward, three));
  EXPECT_TRUE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::backward_data, three));
  EXPECT_FALSE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::backward_filter, three));
  ConvShape strided = three;
  strided.stride_h = 2;
  EXPECT_FALSE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::forward, strided));
  ConvShape five = three;
  five.r = five.s = 5;
  EXPECT_FALSE(conv_algo_supported(ConvAlgo::winograd, ConvDirection::forward, five));
  EXPECT_TRUE(conv_algo_supported(ConvAlgo::gemm, ConvDirection::backward_filter, five));
  EXPECT_EQ(conv_workspace_bytes(ConvAlgo::direct, ConvDirection::forward, three), 0u);
  // gemm: n * (c/g)*r*s * p*q floats = 1 * 2*3*3 * 5*5 * 4 bytes.
  EXPECT_EQ(conv_workspace_bytes(ConvAlgo::gemm, ConvDirection::forward, three), 2u * 9 * 25 * 4);
}

TEST(Conv, WorkspaceGrowsWithTheBatch) {
  ConvShape one{1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1};
  ConvShape four = one;
  four.n = 4;
  for (ConvAlgo algo : {ConvAlgo::gemm, ConvAlgo::winograd}) {
    EXPECT_GT(conv_workspace_bytes(algo, ConvDirection::forward, four),
              conv_workspace_bytes(algo, ConvDirection::forward, one))
        << conv_algo_name(algo);
  }
}

TEST(Conv, AlgorithmNamesRoundTrip) {
  for (ConvAlgo algo : kConvAlgos) {
    ConvAlgo parsed = ConvAlgo::direct;
    ASSERT_TRUE(conv_algo_from_name(conv_algo_name(algo), &parsed));
    EXPECT_EQ(parsed, algo);
  }
  ConvAlgo unused;
  EXPECT_FALSE(conv_algo_from_name("fft", &unused));
}

TEST(Conv, MicroBatchedEqualsUndividedInEveryDirection) {
  ConvShape sh{5, 4, 7, 6, 6, 3, 3, 1, 1, 1, 1, 2};
  auto x = random_vector(sh.x_elements(), 11), w = random_vector(sh.w_elements(), 12);
  auto dy = random_vector(sh.y_elements(), 13);
  auto bias = random_vector(sh.k, 14);
  // Forward and backward-data: winograd, gemm and direct slices; backward-filter
  // has no winograd, so gemm, direct, gemm.
  const ConvMicroBatch mixed[] = {{2, static_cast<ConvAlgoId>(ConvAlgo::winograd)}, {1, static_cast<ConvAlgoId>(ConvAlgo::gemm)}, {2, static_cast<ConvAlgoId>(ConvAlgo::direct)}};
  const ConvMicroBatch filter_mixed[] = {{1, static_cast<ConvAlgoId>(ConvAlgo::gemm)}, {3, static_cast<ConvAlgoId>(ConvAlgo::direct)}, {1, static_cast<ConvAlgoId>(ConvAlgo::gemm)}};

  size_t ws_bytes = std::max({conv_micro_workspace_bytes(ConvDirection::forward, sh, mixed, 3),
                              conv_micro_workspace_bytes(ConvDirection::backward_data, sh, mixed, 3),
                              conv_micro_workspace_bytes(ConvDirection::backward_filter, sh, filter_mixed, 3)});
  // The largest micro-batch sets the workspace: less than the undivided batch's.
  EXPECT_LT(conv_micro_workspace_bytes(ConvDirection::forward, sh, mixed, 3),
            conv_workspace_bytes(ConvAlgo::winograd, ConvDirection::forward, sh));
  std::vector<std::byte> ws(ws_bytes);

  std::vector<float> y_whole(sh.y_elements()), y_micro(sh.y_elements());
  conv_forward(ConvAlgo::direct, sh, x.data(), w.data(), bias.data(), y_whole.data(), nullptr, 0);
  conv_forward_micro(sh, mixed, 3, x.data(), w.data(), bias.data(), y_micro.data(), ws.data(), ws_bytes);
  EXPECT_LE(relative_max_diff(y_micro, y_whole), 1e-5);

  std::vector<float> dx_whole(sh.x_elements()), dx_micro(sh.x_elements());
  conv_backward_data(ConvAlgo::direct, sh, w.data(), dy.data(), dx_whole.data(), nullptr, 0, false);
  conv_backward_data_micro(sh, mixed, 3, w.data(), dy.data(), dx_micro.data(), ws.data(), ws_bytes, false);
  EXPECT_LE(relative_max_diff(dx_micro, dx_whole), 1e-5);

  // Backward-filter with accumulate=true over a prefilled gradient: the slices add
  // to it, and the first slice does not overwrite it.
  auto dw_initial = random_vector(sh.w_elements(), 15);
  for (bool accumulate : {false, true}) {
    std::vector<float> dw_whole = dw_initial, dw_micro = dw_initial;
    conv_backward_filter(ConvAlgo::direct, sh, x.data(), dy.data(), dw_whole.data(), nullptr, 0, accumulate);
    conv_backward_filter_micro(sh, filter_mixed, 3, x.data(), dy.data(), dw_micro.data(), ws.data(),
                               ws_bytes, accumulate);
    EXPECT_LE(relative_max_diff(dw_micro, dw_whole), 1e-5) << "accumulate=" << accumulate;
  }
  // Every micro-batch of one image each, all gemm.
  std::vector<ConvMicroBatch> ones(5, ConvMicroBatch{1, static_cast<ConvAlgoId>(ConvAlgo::gemm)});
  std::vector<float> dw_ones(sh.w_elements()), dw_whole(sh.w_elements());
  conv_backward_filter(ConvAlgo::direct, sh, x.data(), dy.data(), dw_whole.data(), nullptr, 0, false);
  conv_backward_filter_micro(sh, ones.data(), 5, x.data(), dy.data(), dw_ones.data(), ws.data(), ws_bytes, false);
  EXPECT_LE(relative_max_diff(dw_ones, dw_whole), 1e-5);
}

TEST(Conv, BiasGradientSumsOverBatchAndSpace) {
  ConvShape sh{2, 1, 3, 3, 2, 3, 3, 1, 1, 1, 1, 1};  // p = q = 3
  std::vector<float> dy(sh.y_elements(), 1.0f);
  for (int64_t i = 0; i < 9; ++i) dy[9 + i] = 2.0f;   // image 0, channel 1
  std::vector<float> db = {10.0f, 10.0f};
  conv_backward_bias(sh, dy.data(), db.data(), /*accumulate=*/false);
  EXPECT_FLOAT_EQ(db[0], 18.0f);       // 2 images x 9 ones
  EXPECT_FLOAT_EQ(db[1], 18.0f + 9.0f);
  conv_backward_bias(sh, dy.data(), db.data(), /*accumulate=*/true);
  EXPECT_FLOAT_EQ(db[0], 36.0f);
}

TEST(ConvDeathTest, TooSmallWorkspaceAborts) {
  ConvShape sh{1, 2, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1};
  std::vector<float> x(sh.x_elements()), w(sh.w_elements()), y(sh.y_elements());
  size_t needed = conv_workspace_bytes(ConvAlgo::gemm, ConvDirection::forward, sh);
  std::vector<std::byte> ws(needed);
  EXPECT_DEATH(conv_forward(ConvAlgo::gemm, sh, x.data(), w.data(), nullptr, y.data(), ws.data(),
                            needed - 4),
               "workspace is too small");
}

}  // namespace
}  // namespace mplan::rt::cpu
