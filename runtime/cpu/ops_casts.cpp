// The CPU backend of runtime/ops_casts.h: the 16-bit conversions of
// runtime/sixteen_bit.h over whole operands, enqueued on the stream like
// every other op (runtime/cpu/ops.cpp).

#include <cstring>

#include "runtime/check.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"
#include "runtime/sixteen_bit.h"

namespace mplan::rt {
namespace {

// x rounded to the type and widened back (float32: x itself).
inline float rounded_through(float x, StorageType type) {
  switch (type) {
    case StorageType::bfloat16: return bfloat16_to_float(float_to_bfloat16(x));
    case StorageType::float16: return float16_to_float(float_to_float16(x));
    case StorageType::float32: break;
  }
  return x;
}

void check_type(int64_t type, const char* what) {
  MPLAN_RT_CHECK(type >= 0 && type < kStorageTypeCount, what);
}

}  // namespace

void cast_to_float(const Context& ctx, const uint8_t* src, float* dst, int64_t count, int64_t stored,
                   int64_t rounded) {
  check_type(stored, "cast_to_float: no such stored type");
  check_type(rounded, "cast_to_float: no such rounded type");
  cpu::launch(ctx, [=] {
    // 16-bit patterns may lie at any even address: read them by memcpy.
    const auto from = static_cast<StorageType>(stored);
    const auto to = static_cast<StorageType>(rounded);
    for (int64_t i = 0; i < count; ++i) {
      float x;
      if (from == StorageType::float32) {
        std::memcpy(&x, src + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        x = from == StorageType::bfloat16 ? bfloat16_to_float(h) : float16_to_float(h);
      }
      dst[i] = rounded_through(x, to);
    }
  });
}

void cast_from_float(const Context& ctx, const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result,
                     bool accumulate) {
  check_type(stored, "cast_from_float: no such stored type");
  check_type(result, "cast_from_float: no such result type");
  cpu::launch(ctx, [=] {
    const auto to = static_cast<StorageType>(stored);
    const auto computed = static_cast<StorageType>(result);
    if (to == StorageType::float32 && computed == StorageType::float32 && !accumulate) {
      std::memmove(dst, src, static_cast<size_t>(count) * 4);
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      float v = rounded_through(src[i], computed);
      if (to == StorageType::float32) {
        float old;
        std::memcpy(&old, dst + 4 * i, 4);
        if (accumulate) v = old + v;
        std::memcpy(dst + 4 * i, &v, 4);
        continue;
      }
      uint16_t h;
      if (accumulate) {
        std::memcpy(&h, dst + 2 * i, 2);
        v = (to == StorageType::bfloat16 ? bfloat16_to_float(h) : float16_to_float(h)) + v;
      }
      h = to == StorageType::bfloat16 ? float_to_bfloat16(v) : float_to_float16(v);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  });
}

void zero_floats(const Context& ctx, float* dst, int64_t count) {
  cpu::launch(ctx, [=] { std::memset(dst, 0, static_cast<size_t>(count) * sizeof(float)); });
}

}  // namespace mplan::rt
