// Batch normalisation, PyTorch semantics (torch.nn.BatchNorm2d in training mode;
// Ioffe & Szegedy 2015, Algorithm 1 and the backward pass of §3).

#include <cmath>

#include "runtime/ops.h"

namespace mplan::rt {
namespace {

// y = x * scale + shift for one channel, from the saved (float) mean and
// inverse std: the forward pass and its recomputation share it, so a
// recomputed y is bit-identical.
void normalise_channel(const float* x, float gamma, float beta, float mean, float invstd, float* y, int64_t n,
                       int64_t c, int64_t hw, int64_t ch) {
  const float scale = static_cast<float>(static_cast<double>(gamma) * invstd);
  const float shift = static_cast<float>(beta - static_cast<double>(mean) * gamma * invstd);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) y[(b * c + ch) * hw + i] = x[(b * c + ch) * hw + i] * scale + shift;
}

}  // namespace

void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ++ch)
    normalise_channel(x, gamma[ch], beta[ch], save_mean[ch], save_invstd[ch], y, n, c, hw, ch);
}

void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                             float momentum) {
  const int64_t count = n * hw;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) sum += x[(b * c + ch) * hw + i];
    const double mean = sum / count;
    double squares = 0.0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        double d = x[(b * c + ch) * hw + i] - mean;
        squares += d * d;
      }
    const double var_biased = squares / count;
    const double invstd = 1.0 / std::sqrt(var_biased + eps);
    save_mean[ch] = static_cast<float>(mean);
    save_invstd[ch] = static_cast<float>(invstd);
    // PyTorch updates the running variance with the unbiased estimate.
    const double var_unbiased = count > 1 ? squares / (count - 1) : var_biased;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] =
        static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var_unbiased);
    normalise_channel(x, gamma[ch], beta[ch], save_mean[ch], save_invstd[ch], y, n, c, hw, ch);
  }
}

void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 int64_t n, int64_t c, int64_t hw, float eps) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[ch]) + eps);
    const float scale = static_cast<float>(gamma[ch] * invstd);
    const float shift = static_cast<float>(beta[ch] - running_mean[ch] * gamma[ch] * invstd);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) y[(b * c + ch) * hw + i] = x[(b * c + ch) * hw + i] * scale + shift;
  }
}

void batchnorm_backward(const float* x, const float* gamma, const float* save_mean,
                        const float* save_invstd, const float* dy, float* dx, float* dgamma,
                        float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate_dx,
                        bool accumulate_params) {
  const int64_t count = n * hw;
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mean = save_mean[ch], invstd = save_invstd[ch];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * (x[at] - mean) * invstd;
      }
    dgamma[ch] = static_cast<float>(accumulate_params ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
    dbeta[ch] = static_cast<float>(accumulate_params ? dbeta[ch] + sum_dy : sum_dy);
    // dx = gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)), M = n*hw.
    const double mean_dy = sum_dy / count, mean_dy_xhat = sum_dy_xhat / count;
    const double k = gamma[ch] * invstd;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        const double xhat = (x[at] - mean) * invstd;
        const float g = static_cast<float>(k * (dy[at] - mean_dy - xhat * mean_dy_xhat));
        dx[at] = accumulate_dx ? dx[at] + g : g;
      }
  }
}

}  // namespace mplan::rt
