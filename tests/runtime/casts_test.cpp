// The casts of 16-bit programs (runtime/ops_casts.h) on the CPU backend: a
// load widens every 16-bit pattern exactly and rounds a float as
// runtime/sixteen_bit.h does; a store rounds each result to the op's type,
// adds it to the block's value where asked, and rounds the sum to the
// block's type; operands at any even address.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/ops.h"
#include "runtime/sixteen_bit.h"

namespace mplan::rt {
namespace {

constexpr int64_t kF32 = 0, kBf16 = 1, kF16 = 2;
const Context kNow{};  // a null stream: the CPU backend runs the op at once

std::vector<uint8_t> bytes_of(const std::vector<uint16_t>& h, size_t shift = 0) {
  std::vector<uint8_t> out(shift + h.size() * 2);
  std::memcpy(out.data() + shift, h.data(), h.size() * 2);
  return out;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || float_bits(a) == float_bits(b); }

TEST(Casts, LoadsWidenEverySixteenBitPatternExactly) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  // At an address that is 2 mod 4: a 16-bit block may start on any element.
  const std::vector<uint8_t> src = bytes_of(all, 2);
  std::vector<float> out(65536);
  cast_to_float(kNow, src.data() + 2, out.data(), 65536, kBf16, kF32);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_TRUE(same(out[h], bfloat16_to_float(all[h]))) << h;
  cast_to_float(kNow, src.data() + 2, out.data(), 65536, kF16, kF32);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_TRUE(same(out[h], float16_to_float(all[h]))) << h;
}

std::vector<float> floats() {
  std::vector<float> out;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65537) out.push_back(float_from_bits(static_cast<uint32_t>(u)));
  for (float x : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e-8f, 3.0e38f, INFINITY, -INFINITY, NAN}) out.push_back(x);
  return out;
}

TEST(Casts, AFloat32LoadRoundedToSixteenBitsIsTheRoundTrip) {
  const std::vector<float> x = floats();
  std::vector<uint8_t> src(x.size() * 4);
  std::memcpy(src.data(), x.data(), src.size());
  std::vector<float> out(x.size());
  cast_to_float(kNow, src.data(), out.data(), static_cast<int64_t>(x.size()), kF32, kBf16);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same(out[i], bfloat16_to_float(float_to_bfloat16(x[i])))) << x[i];
  cast_to_float(kNow, src.data(), out.data(), static_cast<int64_t>(x.size()), kF32, kF16);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same(out[i], float16_to_float(float_to_float16(x[i])))) << x[i];
  cast_to_float(kNow, src.data(), out.data(), static_cast<int64_t>(x.size()), kF32, kF32);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same(out[i], x[i]));
}

TEST(Casts, StoresRoundToTheBlocksType) {
  const std::vector<float> x = floats();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> dst(x.size() * 2 + 2);
  cast_from_float(kNow, x.data(), dst.data() + 2, n, kF16, kF32, false);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, dst.data() + 2 + 2 * i, 2);
    ASSERT_TRUE(same(float16_to_float(h), float16_to_float(float_to_float16(x[i])))) << x[i];
  }
  std::vector<uint8_t> whole(x.size() * 4);
  cast_from_float(kNow, x.data(), whole.data(), n, kF32, kF32, false);
  EXPECT_EQ(std::memcmp(whole.data(), x.data(), whole.size()), 0);
}

// One element stored with each combination: old value `a` in the block,
// result `c` of the kernel.
float store_one(float a, float c, int64_t stored, int64_t result, bool accumulate) {
  uint8_t block[4];
  if (stored == kF32) {
    std::memcpy(block, &a, 4);
  } else {
    const uint16_t h = stored == kBf16 ? float_to_bfloat16(a) : float_to_float16(a);
    std::memcpy(block, &h, 2);
  }
  cast_from_float(kNow, &c, block, 1, stored, result, accumulate);
  float out;
  cast_to_float(kNow, block, &out, 1, stored, kF32);
  return out;
}

TEST(Casts, AResultIsRoundedToItsOpsTypeBeforeItIsAdded) {
  // 1 + 2^-9 is not a bfloat16 (8 bits of mantissa); 1 + 2^-7 is.
  const float a = 1.0f, c = 0x1.01p-7f;  // c = 2^-7 + 2^-15: bfloat16 rounds it to 2^-7
  EXPECT_EQ(store_one(a, c, kF32, kBf16, true), 1.0f + 0x1p-7f) << "a float32 weight gradient adds the 16-bit result";
  EXPECT_EQ(store_one(a, c, kF32, kF32, true), 1.0f + c) << "a float32 result is added as it is";
  EXPECT_EQ(store_one(a, c, kF32, kBf16, false), 0x1p-7f) << "written, not added";
  // In a bfloat16 block: the sum rounds again. 1 + 3 * 2^-9 rounds up to 1 + 2^-7.
  EXPECT_EQ(store_one(a, 3 * 0x1p-9f, kBf16, kBf16, true), 1.0f + 0x1p-7f);
  // Rounded first, 2^-8 + 2^-17 becomes 2^-8, and 1 + 2^-8 is a tie that rounds to even, 1;
  // added unrounded, the sum is above the tie and rounds up.
  EXPECT_EQ(store_one(a, 0x1p-8f + 0x1p-17f, kBf16, kBf16, true), 1.0f);
  EXPECT_EQ(store_one(a, 0x1p-8f + 0x1p-17f, kBf16, kF32, true), 1.0f + 0x1p-7f);
  // float16 overflows to infinity, which the loss scaling then finds.
  EXPECT_TRUE(std::isinf(store_one(60000.0f, 10000.0f, kF16, kF16, true)));
}

TEST(Casts, ZeroFloatsClearsExactlyItsRange) {
  std::vector<float> x(10, 7.0f);
  zero_floats(kNow, x.data() + 2, 5);
  EXPECT_EQ(x, (std::vector<float>{7, 7, 0, 0, 0, 0, 0, 7, 7, 7}));
}

// A 16-bit program sets its precision as its math (runtime/device.h): the
// CPU backend computes it exactly through the casts, and has no TF32.
TEST(Casts, TheCpuBackendTakesSixteenBitMath) {
  std::string error;
  for (const char* math : {"bf16", "fp16", "fp32"}) {
    EXPECT_TRUE(set_math_mode(math, &error)) << math << ": " << error;
    EXPECT_EQ(math_mode(), math);
  }
  EXPECT_FALSE(set_math_mode("tf32", &error));
  EXPECT_NE(error.find("tf32"), std::string::npos) << error;
  EXPECT_EQ(math_mode(), "fp32");
}

}  // namespace
}  // namespace mplan::rt
