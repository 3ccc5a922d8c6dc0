// Batch normalisation's kernels that batchnorm.cpp's combined ones do not
// give alone: the parameter gradients (BP2; BP1 computes dx) and the forward
// from saved statistics (exact recomputation, no running-statistics update).

#include <cmath>

#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c,
                               int64_t hw, bool accumulate) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mean = save_mean[ch], invstd = save_invstd[ch];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float* xs = x + (b * c + ch) * hw;
      const float* dys = dy + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) {
        sum_dy += dys[i];
        sum_dy_xhat += dys[i] * (xs[i] - mean) * invstd;
      }
    }
    dgamma[ch] = static_cast<float>(accumulate ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
    dbeta[ch] = static_cast<float>(accumulate ? dbeta[ch] + sum_dy : sum_dy);
  }
}

void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ++ch) {
    // The same float scale and shift as batchnorm_forward_train computes from
    // the statistics it saved, so the recomputed y is bit-identical.
    const double mean = save_mean[ch], invstd = save_invstd[ch];
    const float scale = static_cast<float>(gamma[ch] * invstd);
    const float shift = static_cast<float>(beta[ch] - mean * gamma[ch] * invstd);
    for (int64_t b = 0; b < n; ++b) {
      const float* xs = x + (b * c + ch) * hw;
      float* ys = y + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) ys[i] = xs[i] * scale + shift;
    }
  }
}

}  // namespace mplan::rt::cpu
