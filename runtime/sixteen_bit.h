#pragma once
// 16-bit storage of float tensors (docs/model-format.md, "Precision"):
// bfloat16 and IEEE float16 as uint16_t bit patterns, converted from float
// with round-to-nearest-even (what PyTorch's .to(torch.bfloat16 / float16),
// CUDA's __float2bfloat16 / __float2half and IEEE 754's default rounding do)
// and back exactly. NaN stays NaN (a quiet NaN of the same sign); values
// beyond the 16-bit range round to infinity; float16 keeps subnormals.
// Header-only: the CPU backend and the host side of every backend use it.

#include <cstdint>
#include <cstring>

namespace mplan::rt {

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float float_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// bfloat16 is float's upper half: round the lower 16 bits away, ties to even.
inline uint16_t float_to_bfloat16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN, kept quiet
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);  // a carry into the exponent is the right rounding
}

inline float bfloat16_to_float(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }

// float16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline uint16_t float_to_float16(float x) {
  const uint32_t u = float_bits(x);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to 65520 or more: infinity
  const int32_t exponent = static_cast<int32_t>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal: rebias the exponent, drop 13 mantissa bits, ties to even (a
    // carry into the exponent, up to infinity's, is the right rounding).
    const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
    const uint32_t lsb = (rebiased >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((rebiased + 0xfffu + lsb) >> 13));
  }
  if (exponent < -25) return sign;  // below half the least subnormal (2^-25): zero
  // Subnormal: the mantissa with its implicit 1, shifted to units of 2^-24.
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 14 + 13;  // 14 to 24
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | rounded);  // 0x400 (the least normal) when it rounds up to it
}

inline float float16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));  // infinity, NaN
  if (exponent != 0) return float_from_bits(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24, exact in float.
  const float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign != 0 ? -value : value;
}

// Whole arrays (the CPU backend's loads and stores of 16-bit blocks).
inline void to_bfloat16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bfloat16(in[i]);
}
inline void from_bfloat16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16_to_float(in[i]);
}
inline void to_float16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_float16(in[i]);
}
inline void from_float16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float16_to_float(in[i]);
}

}  // namespace mplan::rt
