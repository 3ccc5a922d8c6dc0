// Local response normalisation across channels with PyTorch's semantics
// (torch.nn.LocalResponseNorm: x^2 averaged over a window of `size` channels,
// zero-padded by size/2 before and (size-1)/2 after, so alpha is divided by size):
//   scale_c = k + alpha/size * sum_{c' = c - size/2}^{c + (size-1)/2} x_{c'}^2
//   y_c = x_c * scale_c^-beta
// Backward: dx_i = dy_i * scale_i^-beta
//   - 2*alpha*beta/size * x_i * sum over j whose window holds i of dy_j x_j scale_j^(-beta-1)

#include <cmath>
#include <vector>

#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {
namespace {

// scale (c, hw) of one sample.
void lrn_scale(const float* x, double* scale, int64_t c, int64_t hw, int64_t size, float alpha,
               float k) {
  const int64_t before = size / 2, after = (size - 1) / 2;
  for (int64_t ch = 0; ch < c; ++ch) {
    const int64_t lo = std::max<int64_t>(ch - before, 0), hi = std::min<int64_t>(ch + after, c - 1);
    for (int64_t i = 0; i < hw; ++i) {
      double sum = 0.0;
      for (int64_t j = lo; j <= hi; ++j) sum += static_cast<double>(x[j * hw + i]) * x[j * hw + i];
      scale[ch * hw + i] = k + alpha / size * sum;
    }
  }
}

}  // namespace

void lrn_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k) {
  std::vector<double> scale(static_cast<size_t>(c * hw));
  for (int64_t b = 0; b < n; ++b) {
    const float* xs = x + b * c * hw;
    lrn_scale(xs, scale.data(), c, hw, size, alpha, k);
    for (int64_t i = 0; i < c * hw; ++i)
      y[b * c * hw + i] = static_cast<float>(xs[i] * std::pow(scale[i], -static_cast<double>(beta)));
  }
}

void lrn_backward(const float* x, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                  int64_t size, float alpha, float beta, float k, bool accumulate) {
  const int64_t before = size / 2, after = (size - 1) / 2;
  std::vector<double> scale(static_cast<size_t>(c * hw)), t(static_cast<size_t>(c * hw));
  for (int64_t b = 0; b < n; ++b) {
    const float* xs = x + b * c * hw;
    const float* dys = dy + b * c * hw;
    float* dxs = dx + b * c * hw;
    lrn_scale(xs, scale.data(), c, hw, size, alpha, k);
    // t_j = dy_j * x_j * scale_j^(-beta-1)
    for (int64_t i = 0; i < c * hw; ++i)
      t[i] = dys[i] * static_cast<double>(xs[i]) * std::pow(scale[i], -static_cast<double>(beta) - 1.0);
    for (int64_t ch = 0; ch < c; ++ch) {
      // Channel ch lies in the window of j iff j - before <= ch <= j + after.
      const int64_t lo = std::max<int64_t>(ch - after, 0), hi = std::min<int64_t>(ch + before, c - 1);
      for (int64_t i = 0; i < hw; ++i) {
        double sum = 0.0;
        for (int64_t j = lo; j <= hi; ++j) sum += t[j * hw + i];
        const int64_t at = ch * hw + i;
        const double g = dys[at] * std::pow(scale[at], -static_cast<double>(beta)) -
                         2.0 * alpha * beta / size * xs[at] * sum;
        dxs[at] = static_cast<float>(accumulate ? dxs[at] + g : g);
      }
    }
  }
}

}  // namespace mplan::rt::cpu
