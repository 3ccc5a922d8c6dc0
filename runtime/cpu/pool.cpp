// Max and average pooling with PyTorch's semantics (aten/src/ATen/native/Pool.h:
// pooling_output_shape; AvgPool2d with count_include_pad=True), and global
// average pooling.

#include <limits>

#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

namespace {

// A window clipped to the input, and PyTorch's avg-pool divisor: the window
// clipped to the padded input (count_include_pad=True).
struct PoolWindow {
  int64_t h0, h1, w0, w1;  // [h0, h1) x [w0, w1) inside the input
  int64_t divisor;
};

PoolWindow window_at(const PoolShape& sh, int64_t p, int64_t q) {
  int64_t h0 = p * sh.stride_h - sh.pad_h, w0 = q * sh.stride_w - sh.pad_w;
  int64_t h1 = std::min(h0 + sh.kernel_h, sh.h + sh.pad_h);
  int64_t w1 = std::min(w0 + sh.kernel_w, sh.w + sh.pad_w);
  PoolWindow win;
  win.divisor = (h1 - h0) * (w1 - w0);
  win.h0 = std::max<int64_t>(h0, 0);
  win.w0 = std::max<int64_t>(w0, 0);
  win.h1 = std::min(h1, sh.h);
  win.w1 = std::min(w1, sh.w);
  return win;
}

}  // namespace

void max_pool_forward(const PoolShape& sh, const float* x, float* y) {
  const int64_t P = sh.p(), Q = sh.q();
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    const float* xp = x + plane * sh.h * sh.w;
    float* yp = y + plane * P * Q;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        PoolWindow win = window_at(sh, p, q);
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = win.h0; i < win.h1; ++i)
          for (int64_t j = win.w0; j < win.w1; ++j)
            if (xp[i * sh.w + j] > best) best = xp[i * sh.w + j];
        yp[p * Q + q] = best;
      }
  }
}

void max_pool_backward(const PoolShape& sh, const float* x, const float* y, const float* dy,
                       float* dx, bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  if (!accumulate) fill_f32(dx, sh.n * sh.c * sh.h * sh.w, 0.0f);
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    const float* xp = x + plane * sh.h * sh.w;
    float* dxp = dx + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        PoolWindow win = window_at(sh, p, q);
        const float best = y[plane * P * Q + p * Q + q];
        bool routed = false;
        for (int64_t i = win.h0; i < win.h1 && !routed; ++i)
          for (int64_t j = win.w0; j < win.w1 && !routed; ++j)
            if (xp[i * sh.w + j] == best) {
              dxp[i * sh.w + j] += dy[plane * P * Q + p * Q + q];
              routed = true;
            }
      }
  }
}

void avg_pool_forward(const PoolShape& sh, const float* x, float* y) {
  const int64_t P = sh.p(), Q = sh.q();
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    const float* xp = x + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        PoolWindow win = window_at(sh, p, q);
        double sum = 0.0;
        for (int64_t i = win.h0; i < win.h1; ++i)
          for (int64_t j = win.w0; j < win.w1; ++j) sum += xp[i * sh.w + j];
        y[plane * P * Q + p * Q + q] = static_cast<float>(sum / win.divisor);
      }
  }
}

void avg_pool_backward(const PoolShape& sh, const float* dy, float* dx, bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  if (!accumulate) fill_f32(dx, sh.n * sh.c * sh.h * sh.w, 0.0f);
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    float* dxp = dx + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        PoolWindow win = window_at(sh, p, q);
        const float g = dy[plane * P * Q + p * Q + q] / static_cast<float>(win.divisor);
        for (int64_t i = win.h0; i < win.h1; ++i)
          for (int64_t j = win.w0; j < win.w1; ++j) dxp[i * sh.w + j] += g;
      }
  }
}

void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  for (int64_t plane = 0; plane < n * c; ++plane) {
    double sum = 0.0;
    for (int64_t i = 0; i < hw; ++i) sum += x[plane * hw + i];
    y[plane] = static_cast<float>(sum / hw);
  }
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate) {
  for (int64_t plane = 0; plane < n * c; ++plane) {
    const float g = dy[plane] / static_cast<float>(hw);
    float* dxp = dx + plane * hw;
    for (int64_t i = 0; i < hw; ++i) dxp[i] = accumulate ? dxp[i] + g : g;
  }
}

}  // namespace mplan::rt::cpu
