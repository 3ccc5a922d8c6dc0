// Element-wise ops: helpers, relu, add, concat, flatten. Each loop runs without a
// branch on its flags inside, so that it vectorises (runtime/cpu/vectorize.h).

#include <algorithm>
#include <cstring>

#include "runtime/cpu/vectorize.h"
#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {
namespace {

MPLAN_VECTOR_CLONES void add_into(const float* __restrict src, float* __restrict dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
}

// y = a + b (y may be a or b: element i reads both before writing).
MPLAN_VECTOR_CLONES void sum_of(const float* a, const float* b, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

MPLAN_VECTOR_CLONES void relu_to(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

MPLAN_VECTOR_CLONES void relu_grad(const float* __restrict y, const float* dy, float* dx, int64_t count,
                                   bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < count; ++i) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
  } else {
    for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

void copy_or_add_untimed(const float* src, float* dst, int64_t count, bool accumulate) {
  if (accumulate) {
    if (dst == src) {
      for (int64_t i = 0; i < count; ++i) dst[i] += dst[i];
    } else {
      add_into(src, dst, count);
    }
  } else if (dst != src) {
    std::memmove(dst, src, sizeof(float) * count);
  }
}

}  // namespace

void fill_f32(float* data, int64_t count, float value) {
  OpTimer timer(OpKind::fill_copy);
  for (int64_t i = 0; i < count; ++i) data[i] = value;
}

void copy_or_add(const float* src, float* dst, int64_t count, bool accumulate) {
  OpTimer timer(OpKind::fill_copy);
  copy_or_add_untimed(src, dst, count, accumulate);
}

void relu_forward(const float* x, float* y, int64_t count) {
  OpTimer timer(OpKind::relu);
  relu_to(x, y, count);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  OpTimer timer(OpKind::relu);
  relu_grad(y, dy, dx, count, accumulate);
}

// Eight elements per mask byte, so that each byte is written once (bit i % 8
// of byte i / 8); the arithmetic of y and dx is relu_to's and relu_grad's.
void relu_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count) {
  OpTimer timer(OpKind::relu);
  relu_to(x, y, count);
  for (int64_t byte = 0; byte * 8 < count; ++byte) {
    uint8_t bits = 0;
    const int64_t end = std::min<int64_t>(8, count - byte * 8);
    for (int64_t k = 0; k < end; ++k) bits |= static_cast<uint8_t>(y[byte * 8 + k] > 0.0f) << k;
    mask[byte] = bits;
  }
}

void relu_backward_mask(const uint8_t* mask, const float* dy, float* dx, int64_t count, bool accumulate) {
  OpTimer timer(OpKind::relu);
  for (int64_t i = 0; i < count; ++i) {
    const float g = (mask[i >> 3] >> (i & 7)) & 1 ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

void add_forward(const float* const* inputs, int input_count, float* y, int64_t count) {
  OpTimer timer(OpKind::add);
  if (input_count >= 2) {
    sum_of(inputs[0], inputs[1], y, count);
  } else {
    copy_or_add_untimed(inputs[0], y, count, /*accumulate=*/false);
  }
  for (int i = 2; i < input_count; ++i) copy_or_add_untimed(inputs[i], y, count, /*accumulate=*/true);
}

void add_backward(const float* dy, float* dx, int64_t count, bool accumulate) {
  OpTimer timer(OpKind::add);
  copy_or_add_untimed(dy, dx, count, accumulate);
}

void concat_forward(const float* const* inputs, const int64_t* channels, int input_count,
                    float* y, int64_t n, int64_t hw) {
  OpTimer timer(OpKind::concat);
  int64_t total = 0;
  for (int i = 0; i < input_count; ++i) total += channels[i];
  for (int64_t b = 0; b < n; ++b) {
    int64_t offset = 0;
    for (int i = 0; i < input_count; ++i) {
      std::memcpy(y + (b * total + offset) * hw, inputs[i] + b * channels[i] * hw,
                  sizeof(float) * channels[i] * hw);
      offset += channels[i];
    }
  }
}

void concat_backward(const float* dy, float* dx, int64_t n, int64_t total_channels,
                     int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate) {
  OpTimer timer(OpKind::concat);
  for (int64_t b = 0; b < n; ++b)
    copy_or_add_untimed(dy + (b * total_channels + channel_offset) * hw, dx + b * channels * hw,
                        channels * hw, accumulate);
}

void flatten_forward(const float* x, float* y, int64_t count) {
  OpTimer timer(OpKind::flatten);
  copy_or_add_untimed(x, y, count, /*accumulate=*/false);
}

void flatten_backward(const float* dy, float* dx, int64_t count, bool accumulate) {
  OpTimer timer(OpKind::flatten);
  copy_or_add_untimed(dy, dx, count, accumulate);
}

}  // namespace mplan::rt::cpu
