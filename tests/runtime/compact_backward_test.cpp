// The compact backward forms (runtime/ops.h: a ReLU from one bit per element,
// a max pool from the place of each window's maximum) give the plain forms'
// y and dx bit for bit on the CPU: ties (windows of zeros after a ReLU),
// negative zeros, NaN and infinities, padding, ceil mode, overlapping
// windows, the 2x2 fast path, counts that are not a multiple of 8, in place
// and accumulating.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Values a backward pass meets: many exact zeros and ties, signed zeros,
// infinities, a NaN.
std::vector<float> awkward_values(size_t count, uint32_t seed) {
  std::vector<float> v = random_vector(count, seed, -1.0f, 1.0f);
  std::mt19937 rng(seed + 1);
  for (size_t i = 0; i < count; ++i) {
    switch (rng() % 9) {
      case 0: v[i] = 0.0f; break;
      case 1: v[i] = -0.0f; break;
      case 2: v[i] = 0.5f; break;  // ties
      default: break;
    }
  }
  if (count > 10) {
    v[3] = std::numeric_limits<float>::infinity();
    v[7] = -std::numeric_limits<float>::infinity();
    v[10] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

TEST(CompactRelu, MaskGivesThePlainGradientBitForBit) {
  for (int64_t count : {1, 7, 8, 9, 63, 64, 1000, 4099}) {
    const std::vector<float> x = awkward_values(static_cast<size_t>(count), 11);
    const std::vector<float> dy = awkward_values(static_cast<size_t>(count), 12);
    std::vector<float> y_plain(count), y_compact(count);
    std::vector<uint8_t> mask((count + 7) / 8, 0xAB);
    relu_forward(x.data(), y_plain.data(), count);
    relu_forward_mask(x.data(), y_compact.data(), mask.data(), count);
    ASSERT_TRUE(same_bits(y_plain, y_compact)) << count;
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ((mask[i / 8] >> (i % 8)) & 1, y_plain[i] > 0.0f ? 1 : 0) << "element " << i << " of " << count;
    if (count % 8 != 0) EXPECT_EQ(mask.back() >> (count % 8), 0) << "bits past the count are 0";
    for (bool accumulate : {false, true}) {
      std::vector<float> dx_plain = random_vector(count, 13), dx_compact = dx_plain;
      relu_backward(y_plain.data(), dy.data(), dx_plain.data(), count, accumulate);
      relu_backward_mask(mask.data(), dy.data(), dx_compact.data(), count, accumulate);
      EXPECT_TRUE(same_bits(dx_plain, dx_compact)) << count << (accumulate ? " accumulating" : "");
    }
  }
}

TEST(CompactRelu, InPlaceForwardAndBackward) {
  const int64_t count = 1001;
  const std::vector<float> x = awkward_values(count, 21), dy = awkward_values(count, 22);
  std::vector<float> y_plain(count), dx_plain(count);
  relu_forward(x.data(), y_plain.data(), count);
  relu_backward(y_plain.data(), dy.data(), dx_plain.data(), count, false);
  std::vector<float> buffer = x, gradient = dy;
  std::vector<uint8_t> mask((count + 7) / 8);
  relu_forward_mask(buffer.data(), buffer.data(), mask.data(), count);  // y over x
  relu_backward_mask(mask.data(), gradient.data(), gradient.data(), count, false);  // dx over dy
  EXPECT_TRUE(same_bits(buffer, y_plain));
  EXPECT_TRUE(same_bits(gradient, dx_plain));
}

struct PoolCase {
  int64_t n, c, h, w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool ceil_mode;
};

TEST(CompactMaxPool, PlacesGiveThePlainGradientBitForBit) {
  const std::vector<PoolCase> cases = {
      {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, false},    // the 2x2 fast path
      {2, 3, 9, 7, 2, 2, 2, 2, 0, 0, true},     // odd sizes, ceil mode
      {2, 4, 12, 12, 3, 3, 2, 2, 1, 1, false},  // ResNet's stem: overlapping, padded
      {1, 2, 11, 13, 3, 3, 2, 2, 1, 1, true},
      {1, 3, 10, 10, 3, 2, 1, 3, 1, 1, false},  // stride 1 rows: each element in up to 3 windows
      {1, 1, 33, 31, 15, 17, 4, 3, 7, 8, true},  // 255 elements, the most a byte can place
  };
  for (const PoolCase& k : cases) {
    PoolShape sh;
    sh.n = k.n, sh.c = k.c, sh.h = k.h, sh.w = k.w, sh.kernel_h = k.kernel_h, sh.kernel_w = k.kernel_w;
    sh.stride_h = k.stride_h, sh.stride_w = k.stride_w, sh.pad_h = k.pad_h, sh.pad_w = k.pad_w;
    sh.ceil_mode = k.ceil_mode;
    const int64_t in = sh.n * sh.c * sh.h * sh.w, out = sh.n * sh.c * sh.p() * sh.q();
    // After a ReLU: a third of the values 0, so many windows tie.
    std::vector<float> x = awkward_values(static_cast<size_t>(in), 31);
    for (float& v : x)
      if (v < -0.3f) v = 0.0f;
    const std::vector<float> dy = awkward_values(static_cast<size_t>(out), 32);
    std::vector<float> y_plain(out), y_compact(out);
    std::vector<uint8_t> places(out);
    max_pool_forward(sh, x.data(), y_plain.data());
    max_pool_forward_indices(sh, x.data(), y_compact.data(), places.data());
    ASSERT_TRUE(same_bits(y_plain, y_compact)) << sh.kernel_h << "x" << sh.kernel_w;
    for (bool accumulate : {false, true}) {
      std::vector<float> dx_plain = random_vector(in, 33), dx_compact = dx_plain;
      max_pool_backward(sh, x.data(), y_plain.data(), dy.data(), dx_plain.data(), accumulate);
      max_pool_backward_indices(sh, places.data(), dy.data(), dx_compact.data(), accumulate);
      EXPECT_TRUE(same_bits(dx_plain, dx_compact))
          << sh.kernel_h << "x" << sh.kernel_w << " stride " << sh.stride_h << "x" << sh.stride_w << " pad "
          << sh.pad_h << (accumulate ? " accumulating" : "");
    }
  }
}

TEST(CompactMaxPool, AWindowWithNoElementEqualToItsMaximumRoutesNothing) {
  // A window of NaN: y is -inf (the forward skips NaN) and no element equals
  // it, so the plain backward sends nothing; its place says so.
  PoolShape sh;
  sh.n = 1, sh.c = 1, sh.h = 2, sh.w = 4, sh.kernel_h = 2, sh.kernel_w = 2, sh.stride_h = 2, sh.stride_w = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, nan, 1.0f, 2.0f, nan, nan, 3.0f, -1.0f};
  std::vector<float> y(2);
  std::vector<uint8_t> places(2);
  max_pool_forward_indices(sh, x.data(), y.data(), places.data());
  EXPECT_EQ(places[0], kNoPoolIndex);
  EXPECT_EQ(places[1], 2);  // row 1, column 0 of the window: the 3
  const std::vector<float> dy = {5.0f, 7.0f};
  std::vector<float> dx(8, 1.0f);
  max_pool_backward_indices(sh, places.data(), dy.data(), dx.data(), false);
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 0, 0, 0, 0, 7, 0}));
}

// Places no forward pass wrote (the profiler's filled slots): one beyond the
// window, or in its padding outside the image, routes nothing, as the CUDA
// kernel (which gathers from the places inside) does, and dx is written
// within its bounds only.
TEST(CompactMaxPool, PlacesOutsideTheWindowOrTheImageRouteNothing) {
  PoolShape sh;
  sh.n = 1, sh.c = 1, sh.h = 2, sh.w = 2, sh.kernel_h = 2, sh.kernel_w = 2, sh.stride_h = 2, sh.stride_w = 2;
  sh.pad_h = 1, sh.pad_w = 1;  // a 2x2 output; each window holds one pixel of the image
  ASSERT_EQ(sh.p(), 2);
  ASSERT_EQ(sh.q(), 2);
  // Window (0, 0) covers padding at places 0, 1 and 2 and the pixel (0, 0) at place 3.
  const std::vector<uint8_t> places = {3, 0, 200, 4};
  const std::vector<float> dy = {5.0f, 7.0f, 11.0f, 13.0f};
  // dx's 4 elements between guard bands that the places outside would reach.
  constexpr size_t kBefore = 64;
  std::vector<float> memory(kBefore + 4 + 512, -1.0f);
  float* dx = memory.data() + kBefore;
  max_pool_backward_indices(sh, places.data(), dy.data(), dx, false);
  EXPECT_EQ(std::vector<float>(dx, dx + 4), (std::vector<float>{5, 0, 0, 0}));
  for (size_t i = 0; i < memory.size(); ++i)
    if (i < kBefore || i >= kBefore + 4) ASSERT_EQ(memory[i], -1.0f) << "written outside dx at " << i;
}

}  // namespace
}  // namespace mplan::rt::cpu
