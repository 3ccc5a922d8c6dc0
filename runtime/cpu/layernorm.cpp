// Layer normalisation over one axis (F.layer_norm): x (outer, c, inner)
// normalised over c at each of the outer*inner positions. Statistics in
// double per position, walked channel by channel so that both layouts
// (features: inner = 1; channels of [C, H, W]: inner = H*W) stream through memory.

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/normalization_kernels.h"

namespace mplan::rt::cpu {

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps) {
  std::vector<double> sum(inner), sum_sq(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* xo = x + o * c * inner;
    float* yo = y + o * c * inner;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(sum_sq.begin(), sum_sq.end(), 0.0);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        const double v = xo[ch * inner + i];
        sum[i] += v;
        sum_sq[i] += v * v;
      }
    for (int64_t i = 0; i < inner; ++i) {
      const double m = sum[i] / static_cast<double>(c);
      const double var = std::max(sum_sq[i] / static_cast<double>(c) - m * m, 0.0);
      mean[o * inner + i] = static_cast<float>(m);
      invstd[o * inner + i] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    }
    const float* mo = mean + o * inner;
    const float* so = invstd + o * inner;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i)
        yo[ch * inner + i] = (xo[ch * inner + i] - mo[i]) * so[i] * gamma[ch] + beta[ch];
  }
}

void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate) {
  // dx = invstd * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * gamma.
  std::vector<double> sum_g(inner), sum_g_xhat(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* xo = x + o * c * inner;
    const float* dyo = dy + o * c * inner;
    float* dxo = dx + o * c * inner;
    const float* mo = mean + o * inner;
    const float* so = invstd + o * inner;
    std::fill(sum_g.begin(), sum_g.end(), 0.0);
    std::fill(sum_g_xhat.begin(), sum_g_xhat.end(), 0.0);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        const double g = static_cast<double>(dyo[ch * inner + i]) * gamma[ch];
        const double x_hat = (static_cast<double>(xo[ch * inner + i]) - mo[i]) * so[i];
        sum_g[i] += g;
        sum_g_xhat[i] += g * x_hat;
      }
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        const double g = static_cast<double>(dyo[ch * inner + i]) * gamma[ch];
        const double x_hat = (static_cast<double>(xo[ch * inner + i]) - mo[i]) * so[i];
        const double v = so[i] * (g - sum_g[i] / c - x_hat * sum_g_xhat[i] / c);
        float& out = dxo[ch * inner + i];
        out = static_cast<float>(accumulate ? out + v : v);
      }
  }
}

void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum_gx = 0.0, sum_g = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t at = (o * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const double g = dy[at + i];
        sum_g += g;
        sum_gx += g * (static_cast<double>(x[at + i]) - mean[o * inner + i]) * invstd[o * inner + i];
      }
    }
    dgamma[ch] = static_cast<float>(dgamma[ch] + sum_gx);
    dbeta[ch] = static_cast<float>(dbeta[ch] + sum_g);
  }
}

}  // namespace mplan::rt::cpu
