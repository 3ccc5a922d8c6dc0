// The channel ops of runtime/ops_channel.h: per-channel multiply (squeeze-and-
// excitation, layer scale), adaptive average pooling, channel shuffle, and
// the slice of one axis (torch.chunk).

#include <cstring>

#include "runtime/cpu/channel_kernels.h"

namespace mplan::rt::cpu {
namespace {

inline void store(float* dx, int64_t i, float g, bool accumulate) { dx[i] = accumulate ? dx[i] + g : g; }

// PyTorch's adaptive pooling windows (aten/src/ATen/native/AdaptivePooling.h).
inline int64_t window_start(int64_t out_index, int64_t out_size, int64_t in_size) {
  return (out_index * in_size) / out_size;
}
inline int64_t window_end(int64_t out_index, int64_t out_size, int64_t in_size) {
  return ((out_index + 1) * in_size + out_size - 1) / out_size;
}

}  // namespace

void channel_mul_forward(const float* x, const float* s, float* y, int64_t n, int64_t c, int64_t inner,
                         bool s_per_sample) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float factor = s[(s_per_sample ? b * c : 0) + ch];
      const int64_t at = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) y[at + i] = x[at + i] * factor;
    }
}

void channel_mul_backward_x(const float* s, const float* dy, float* dx, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float factor = s[(s_per_sample ? b * c : 0) + ch];
      const int64_t at = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) store(dx, at + i, dy[at + i] * factor, accumulate);
    }
}

void channel_mul_backward_s(const float* x, const float* dy, float* ds, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate) {
  if (s_per_sample) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t at = (b * c + ch) * inner;
        double sum = 0.0;
        for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(dy[at + i]) * x[at + i];
        ds[b * c + ch] = static_cast<float>(accumulate ? ds[b * c + ch] + sum : sum);
      }
    return;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(dy[at + i]) * x[at + i];
    }
    ds[ch] = static_cast<float>(accumulate ? ds[ch] + sum : sum);
  }
}

void adaptive_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                               int64_t out_w) {
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x + p * h * w;
    float* out = y + p * out_h * out_w;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t h0 = window_start(oh, out_h, h), h1 = window_end(oh, out_h, h);
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const int64_t w0 = window_start(ow, out_w, w), w1 = window_end(ow, out_w, w);
        double sum = 0.0;
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) sum += in[i * w + j];
        out[oh * out_w + ow] = static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

void adaptive_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool accumulate) {
  if (!accumulate) std::memset(dx, 0, sizeof(float) * planes * h * w);
  for (int64_t p = 0; p < planes; ++p) {
    float* in = dx + p * h * w;
    const float* out = dy + p * out_h * out_w;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t h0 = window_start(oh, out_h, h), h1 = window_end(oh, out_h, h);
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const int64_t w0 = window_start(ow, out_w, w), w1 = window_end(ow, out_w, w);
        const float g = out[oh * out_w + ow] / static_cast<float>((h1 - h0) * (w1 - w0));
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) in[i * w + j] += g;
      }
    }
  }
}

void channel_shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                     bool accumulate) {
  const int64_t per_group = c / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < groups; ++i)
      for (int64_t j = 0; j < per_group; ++j) {
        const float* src = x + (b * c + i * per_group + j) * inner;
        float* dst = y + (b * c + j * groups + i) * inner;
        if (accumulate) {
          for (int64_t e = 0; e < inner; ++e) dst[e] += src[e];
        } else {
          std::memcpy(dst, src, sizeof(float) * inner);
        }
      }
}

void slice_forward(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols) {
  for (int64_t o = 0; o < outer; ++o) std::memcpy(y + o * y_cols, x + o * x_cols + offset, sizeof(float) * y_cols);
}

void slice_backward(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                    bool accumulate) {
  for (int64_t o = 0; o < outer; ++o) {
    float* row = dx + o * x_cols;
    const float* g = dy + o * y_cols;
    if (accumulate) {
      for (int64_t i = 0; i < y_cols; ++i) row[offset + i] += g[i];
      continue;
    }
    std::memset(row, 0, sizeof(float) * offset);
    std::memcpy(row + offset, g, sizeof(float) * y_cols);
    std::memset(row + offset + y_cols, 0, sizeof(float) * (x_cols - offset - y_cols));
  }
}

}  // namespace mplan::rt::cpu
