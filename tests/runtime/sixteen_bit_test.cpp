// 16-bit storage (runtime/sixteen_bit.h): every 16-bit pattern survives the
// round trip through float, and float rounds to the nearest 16-bit value,
// ties to even, against independent references: the compiler's IEEE
// _Float16 conversion for float16, the exact distances in double for
// bfloat16. Ties, the subnormal and overflow boundaries and NaN are checked
// at every place they occur, other floats on a stride over all patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/sixteen_bit.h"

namespace mplan::rt {
namespace {

bool is_nan16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_nan_bf16(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// Floats to convert: a stride over every pattern, and for every 16-bit
// value v the floats around v and around the midpoint to its neighbour.
std::vector<float> probes(float (*to_float)(uint16_t), bool (*is_nan)(uint16_t)) {
  std::vector<float> out;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) out.push_back(float_from_bits(static_cast<uint32_t>(u)));
  for (uint32_t h = 0; h < 0xffffu; ++h) {
    const auto a = static_cast<uint16_t>(h), b = static_cast<uint16_t>(h + 1);
    if (is_nan(a) || is_nan(b)) continue;
    const float lo = to_float(a), hi = to_float(b);
    if (std::isinf(lo) || std::isinf(hi) || std::signbit(lo) != std::signbit(hi)) continue;
    const auto mid = static_cast<float>((static_cast<double>(lo) + static_cast<double>(hi)) / 2);
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid + 1)}) out.push_back(x);
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98023224e-8f,
                  3.0e-8f, 3.4028235e38f, -3.4028235e38f, 1.0e-45f})
    out.push_back(x);
  return out;
}

// Every pattern back to itself through float; NaN to a NaN.
void expect_every_pattern_round_trips(float (*to_float)(uint16_t), uint16_t (*from_float)(float),
                                      bool (*is_nan)(uint16_t)) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float x = to_float(static_cast<uint16_t>(h));
    const uint16_t back = from_float(x);
    if (is_nan(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(x)) << h;
      EXPECT_TRUE(is_nan(back)) << h;
      continue;
    }
    EXPECT_EQ(back, h) << "pattern " << h << " = " << x;
  }
}

TEST(SixteenBit, EveryFloat16PatternRoundTrips) {
  expect_every_pattern_round_trips(float16_to_float, float_to_float16, is_nan16);
}

TEST(SixteenBit, EveryBfloat16PatternRoundTrips) {
  expect_every_pattern_round_trips(bfloat16_to_float, float_to_bfloat16, is_nan_bf16);
}

#if defined(__FLT16_MAX__)
TEST(SixteenBit, Float16RoundsAsIeee754Does) {
  size_t checked = 0;
  for (float x : probes(float16_to_float, is_nan16)) {
    const auto ieee = static_cast<_Float16>(x);
    uint16_t expected;
    std::memcpy(&expected, &ieee, sizeof expected);
    const uint16_t got = float_to_float16(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(is_nan16(got)) << x;
      continue;
    }
    ASSERT_EQ(got, expected) << "x = " << x << " (bits " << float_bits(x) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
}
#endif

// The nearest bfloat16, from exact distances: the two bfloat16 values
// around x are x's upper 16 bits and the next pattern away from zero.
uint16_t nearest_bfloat16(float x) {
  const uint32_t u = float_bits(x);
  const auto below = static_cast<uint16_t>(u >> 16), above = static_cast<uint16_t>(below + 1);
  const double d_below = std::fabs(static_cast<double>(x) - bfloat16_to_float(below));
  // Past the largest finite value the next step is 2^128 (it rounds to infinity).
  const double above_value = (above & 0x7f80u) == 0x7f80u ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(x))
                                                          : static_cast<double>(bfloat16_to_float(above));
  const double d_above = std::fabs(above_value - static_cast<double>(x));
  if (d_below < d_above) return below;
  if (d_above < d_below) return above;
  return (below & 1u) == 0 ? below : above;
}

TEST(SixteenBit, Bfloat16RoundsToTheNearestTiesToEven) {
  size_t checked = 0;
  for (float x : probes(bfloat16_to_float, is_nan_bf16)) {
    if (std::isnan(x)) {
      EXPECT_TRUE(is_nan_bf16(float_to_bfloat16(x))) << x;
      continue;
    }
    if (std::isinf(x)) {
      EXPECT_EQ(float_to_bfloat16(x), float_bits(x) >> 16);
      continue;
    }
    ASSERT_EQ(float_to_bfloat16(x), nearest_bfloat16(x)) << "x = " << x << " (bits " << float_bits(x) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
  // Beyond the largest bfloat16's half step: infinity.
  EXPECT_EQ(float_to_bfloat16(3.4028235e38f), 0x7f80u);
  EXPECT_EQ(float_to_bfloat16(-3.4028235e38f), 0xff80u);
}

TEST(SixteenBit, ArraysConvertElementByElement) {
  const std::vector<float> x = {1.0f, -2.5f, 1.00390625f, 3.0e-6f, 70000.0f};
  std::vector<uint16_t> h(x.size());
  std::vector<float> back(x.size());
  to_float16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  from_float16(h.data(), back.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], float16_to_float(float_to_float16(x[i])));
  EXPECT_TRUE(std::isinf(back[4]));
  to_bfloat16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  from_bfloat16(h.data(), back.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], bfloat16_to_float(float_to_bfloat16(x[i])));
  EXPECT_EQ(back[2], 1.0f);  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: the even one
}

}  // namespace
}  // namespace mplan::rt
