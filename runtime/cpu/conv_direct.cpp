// The "direct" convolution: the seven nested loops of mu-cuDNN Algorithm 1, with
// no workspace (cuDNN's IMPLICIT_GEMM / ALGO_0 family). The reference the other
// algorithms are tested against.

#include <cstring>
#include <vector>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/conv_window.h"

namespace mplan::rt::cpu {

void conv_forward_direct(const ConvShape& sh, const float* x, const float* w, float* y,
                         bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  if (!accumulate) std::memset(y, 0, sizeof(float) * sh.y_elements());
  for (int64_t n = 0; n < sh.n; ++n) {
    for (int64_t k = 0; k < sh.k; ++k) {
      const int64_t g = k / kg;
      float* yp = y + (n * sh.k + k) * P * Q;
      for (int64_t cl = 0; cl < cg; ++cl) {
        const float* xp = x + (n * sh.c + g * cg + cl) * sh.h * sh.w;
        const float* wp = w + (k * cg + cl) * sh.r * sh.s;
        for (int64_t r = 0; r < sh.r; ++r) {
          OutputRange pr = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
          for (int64_t s = 0; s < sh.s; ++s) {
            OutputRange qr = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
            const float wv = wp[r * sh.s + s];
            for (int64_t p = pr.lo; p < pr.hi; ++p) {
              const float* xrow = xp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
              float* yrow = yp + p * Q;
              for (int64_t q = qr.lo; q < qr.hi; ++q) yrow[q] += wv * xrow[q * sh.stride_w];
            }
          }
        }
      }
    }
  }
}

void conv_backward_data_direct(const ConvShape& sh, const float* w, const float* dy, float* dx,
                               bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  if (!accumulate) std::memset(dx, 0, sizeof(float) * sh.x_elements());
  for (int64_t n = 0; n < sh.n; ++n) {
    for (int64_t k = 0; k < sh.k; ++k) {
      const int64_t g = k / kg;
      const float* dyp = dy + (n * sh.k + k) * P * Q;
      for (int64_t cl = 0; cl < cg; ++cl) {
        float* dxp = dx + (n * sh.c + g * cg + cl) * sh.h * sh.w;
        const float* wp = w + (k * cg + cl) * sh.r * sh.s;
        for (int64_t r = 0; r < sh.r; ++r) {
          OutputRange pr = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
          for (int64_t s = 0; s < sh.s; ++s) {
            OutputRange qr = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
            const float wv = wp[r * sh.s + s];
            for (int64_t p = pr.lo; p < pr.hi; ++p) {
              float* dxrow = dxp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
              const float* dyrow = dyp + p * Q;
              for (int64_t q = qr.lo; q < qr.hi; ++q) dxrow[q * sh.stride_w] += wv * dyrow[q];
            }
          }
        }
      }
    }
  }
}

void conv_backward_filter_direct(const ConvShape& sh, const float* x, const float* dy, float* dw,
                                 bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  // Sums in double: this is the reference the other algorithms are checked against.
  std::vector<double> sum(static_cast<size_t>(sh.r * sh.s));
  for (int64_t k = 0; k < sh.k; ++k) {
    const int64_t g = k / kg;
    for (int64_t cl = 0; cl < cg; ++cl) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t n = 0; n < sh.n; ++n) {
        const float* xp = x + (n * sh.c + g * cg + cl) * sh.h * sh.w;
        const float* dyp = dy + (n * sh.k + k) * P * Q;
        for (int64_t r = 0; r < sh.r; ++r) {
          OutputRange pr = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
          for (int64_t s = 0; s < sh.s; ++s) {
            OutputRange qr = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
            double acc = 0.0;
            for (int64_t p = pr.lo; p < pr.hi; ++p) {
              const float* xrow = xp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
              const float* dyrow = dyp + p * Q;
              for (int64_t q = qr.lo; q < qr.hi; ++q)
                acc += static_cast<double>(xrow[q * sh.stride_w]) * dyrow[q];
            }
            sum[r * sh.s + s] += acc;
          }
        }
      }
      float* dwp = dw + (k * cg + cl) * sh.r * sh.s;
      for (int64_t i = 0; i < sh.r * sh.s; ++i)
        dwp[i] = static_cast<float>(accumulate ? dwp[i] + sum[i] : sum[i]);
    }
  }
}

}  // namespace mplan::rt::cpu
