#pragma once
// The casts of a 16-bit program (docs/generated-program.md, "16-bit
// programs"). A 16-bit block holds bfloat16 or float16 bit patterns; the
// kernels compute in float. The CPU backend, the reference, brackets every
// kernel that touches a 16-bit block with these casts: it reads each operand
// into float scratch (a 16-bit operand widened exactly; a float32 operand of
// a 16-bit op rounded through the 16-bit type, autocast's input cast fused
// into the load), runs the float kernel, and stores each written operand back
// in its block's type, rounded to nearest even (runtime/sixteen_bit.h).
//
// Part of the backend-neutral API of runtime/ops.h (which includes this file).
// CPU: runtime/cpu/ops_casts.cpp. CUDA: runtime/cuda/casts.cu (cast_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// The type of a block's elements, as the casts' `stored` and `rounded` arguments.
enum class StorageType : int64_t { float32 = 0, bfloat16 = 1, float16 = 2 };
inline constexpr int64_t kStorageTypeCount = 3;
// Bytes of one element (4 or 2).
inline constexpr int64_t storage_bytes(int64_t type) { return type == 0 ? 4 : 2; }

// dst[i] = the i-th of `count` values at src, which holds them as `stored`,
// then rounded to `rounded` (float32: not rounded) and widened back to float.
void cast_to_float(const Context& ctx, const uint8_t* src, float* dst, int64_t count, int64_t stored,
                   int64_t rounded);
// Stores the `count` results at src into dst, which holds `stored`: each
// result rounded to `result` (the type the op computes in; float32: not
// rounded), added to dst's value when `accumulate` (in float), and the sum
// rounded to `stored` (to nearest even; float32: kept).
void cast_from_float(const Context& ctx, const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result,
                     bool accumulate);
// dst[0 .. count) = 0: the scratch a kernel adds its results into, when they
// are added to the block after rounding (cast_from_float's accumulate).
void zero_floats(const Context& ctx, float* dst, int64_t count);

}  // namespace mplan::rt
