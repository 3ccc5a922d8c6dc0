// The channel ops' kernels (channel_kernels.h), as runtime/cpu/channel_ops.cpp:
// per-channel multiply, adaptive average pooling, channel shuffle and slices,
// one thread per output element (per factor for the multiply's gradient).

#include "runtime/cuda/channel_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

__global__ void channel_mul_forward_kernel(const float* x, const float* s, float* y, int64_t n, int64_t c,
                                           int64_t inner, bool per_sample) {
  MPLAN_FOR_EACH(i, n * c * inner) {
    const int64_t row = i / inner;  // b * c + channel
    y[i] = x[i] * s[per_sample ? row : row % c];
  }
}

__global__ void channel_mul_backward_x_kernel(const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                                              int64_t inner, bool per_sample, bool accumulate) {
  MPLAN_FOR_EACH(i, n * c * inner) {
    const int64_t row = i / inner;
    store(dx, i, dy[i] * s[per_sample ? row : row % c], accumulate);
  }
}

// One thread per factor: per sample, the (b, channel) row; shared, the channel over every sample.
__global__ void channel_mul_backward_s_kernel(const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                                              int64_t inner, bool per_sample, bool accumulate) {
  MPLAN_FOR_EACH(j, per_sample ? n * c : c) {
    double sum = 0.0;
    for (int64_t b = per_sample ? j / c : 0; b < (per_sample ? j / c + 1 : n); ++b) {
      const int64_t at = (b * c + (per_sample ? j % c : j)) * inner;
      for (int64_t e = 0; e < inner; ++e) sum += static_cast<double>(dy[at + e]) * x[at + e];
    }
    ds[j] = static_cast<float>(accumulate ? ds[j] + sum : sum);
  }
}

__device__ __forceinline__ int64_t window_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
__device__ __forceinline__ int64_t window_end(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

__global__ void adaptive_avg_pool_forward_kernel(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                                 int64_t out_h, int64_t out_w) {
  MPLAN_FOR_EACH(i, planes * out_h * out_w) {
    const int64_t plane = i / (out_h * out_w), oh = (i / out_w) % out_h, ow = i % out_w;
    const int64_t h0 = window_start(oh, out_h, h), h1 = window_end(oh, out_h, h);
    const int64_t w0 = window_start(ow, out_w, w), w1 = window_end(ow, out_w, w);
    double sum = 0.0;
    for (int64_t r = h0; r < h1; ++r)
      for (int64_t q = w0; q < w1; ++q) sum += x[(plane * h + r) * w + q];
    y[i] = static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
  }
}

__global__ void adaptive_avg_pool_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                                                  int64_t out_h, int64_t out_w, bool accumulate) {
  MPLAN_FOR_EACH(i, planes * h * w) {
    const int64_t plane = i / (h * w), r = (i / w) % h, q = i % w;
    float g = 0.0f;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t h0 = window_start(oh, out_h, h), h1 = window_end(oh, out_h, h);
      if (r < h0 || r >= h1) continue;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const int64_t w0 = window_start(ow, out_w, w), w1 = window_end(ow, out_w, w);
        if (q < w0 || q >= w1) continue;
        g += dy[(plane * out_h + oh) * out_w + ow] / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
    store(dx, i, g, accumulate);
  }
}

// One thread per output element: output channel j*groups + i is input channel i*(c/groups) + j.
__global__ void channel_shuffle_kernel(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                                       bool accumulate) {
  const int64_t per_group = c / groups;
  MPLAN_FOR_EACH(at, n * c * inner) {
    const int64_t e = at % inner, out_channel = (at / inner) % c, b = at / (inner * c);
    const int64_t j = out_channel / groups, i = out_channel % groups;
    store(y, at, x[(b * c + i * per_group + j) * inner + e], accumulate);
  }
}

__global__ void slice_forward_kernel(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                                     int64_t y_cols) {
  MPLAN_FOR_EACH(i, outer * y_cols) y[i] = x[(i / y_cols) * x_cols + offset + i % y_cols];
}

__global__ void slice_backward_kernel(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                                      int64_t y_cols, bool accumulate) {
  MPLAN_FOR_EACH(i, outer * x_cols) {
    const int64_t col = i % x_cols - offset;
    const bool inside = col >= 0 && col < y_cols;
    if (accumulate) {
      if (inside) dx[i] += dy[(i / x_cols) * y_cols + col];
    } else {
      dx[i] = inside ? dy[(i / x_cols) * y_cols + col] : 0.0f;
    }
  }
}

}  // namespace

void channel_mul_forward(const float* x, const float* s, float* y, int64_t n, int64_t c, int64_t inner,
                         bool s_per_sample, cudaStream_t stream) {
  MPLAN_LAUNCH(channel_mul_forward_kernel, n * c * inner, x, s, y, n, c, inner, s_per_sample);
}
void channel_mul_backward_x(const float* s, const float* dy, float* dx, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate, cudaStream_t stream) {
  MPLAN_LAUNCH(channel_mul_backward_x_kernel, n * c * inner, s, dy, dx, n, c, inner, s_per_sample, accumulate);
}
void channel_mul_backward_s(const float* x, const float* dy, float* ds, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate, cudaStream_t stream) {
  MPLAN_LAUNCH(channel_mul_backward_s_kernel, s_per_sample ? n * c : c, x, dy, ds, n, c, inner, s_per_sample,
               accumulate);
}
void adaptive_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                               int64_t out_w, cudaStream_t stream) {
  MPLAN_LAUNCH(adaptive_avg_pool_forward_kernel, planes * out_h * out_w, x, y, planes, h, w, out_h, out_w);
}
void adaptive_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool accumulate, cudaStream_t stream) {
  MPLAN_LAUNCH(adaptive_avg_pool_backward_kernel, planes * h * w, dy, dx, planes, h, w, out_h, out_w, accumulate);
}
void channel_shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups, bool accumulate,
                     cudaStream_t stream) {
  MPLAN_LAUNCH(channel_shuffle_kernel, n * c * inner, x, y, n, c, inner, groups, accumulate);
}
void slice_forward(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                   cudaStream_t stream) {
  MPLAN_LAUNCH(slice_forward_kernel, outer * y_cols, x, y, outer, x_cols, offset, y_cols);
}
void slice_backward(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                    bool accumulate, cudaStream_t stream) {
  MPLAN_LAUNCH(slice_backward_kernel, outer * x_cols, dy, dx, outer, x_cols, offset, y_cols, accumulate);
}

}  // namespace mplan::rt::cuda
