// Element-wise ops: helpers, relu, add, concat, flatten.

#include <cstring>

#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

void fill_f32(float* data, int64_t count, float value) {
  for (int64_t i = 0; i < count; ++i) data[i] = value;
}

void copy_or_add(const float* src, float* dst, int64_t count, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
  } else if (dst != src) {
    std::memmove(dst, src, sizeof(float) * count);
  }
}

void relu_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    float g = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

void add_forward(const float* const* inputs, int input_count, float* y, int64_t count) {
  copy_or_add(inputs[0], y, count, /*accumulate=*/false);
  for (int i = 1; i < input_count; ++i) copy_or_add(inputs[i], y, count, /*accumulate=*/true);
}

void add_backward(const float* dy, float* dx, int64_t count, bool accumulate) {
  copy_or_add(dy, dx, count, accumulate);
}

void concat_forward(const float* const* inputs, const int64_t* channels, int input_count,
                    float* y, int64_t n, int64_t hw) {
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
  for (int64_t b = 0; b < n; ++b)
    copy_or_add(dy + (b * total_channels + channel_offset) * hw, dx + b * channels * hw,
                channels * hw, accumulate);
}

void flatten_forward(const float* x, float* y, int64_t count) {
  copy_or_add(x, y, count, /*accumulate=*/false);
}

void flatten_backward(const float* dy, float* dx, int64_t count, bool accumulate) {
  copy_or_add(dy, dx, count, accumulate);
}

}  // namespace mplan::rt::cpu
