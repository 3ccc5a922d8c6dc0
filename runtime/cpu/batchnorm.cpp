// Batch normalisation, PyTorch semantics (torch.nn.BatchNorm2d in training mode;
// Ioffe & Szegedy 2015, Algorithm 1 and the backward pass of §3).
//
// Numerics: element-wise work is in float; every per-channel sum is accumulated in
// double from float partial sums over chunks of at most kChunk elements of one
// plane (16 independent lanes, so the loops vectorise and the order is the same on
// every CPU). Each pass walks a block of 64 channels image by image, in memory order. The variance uses shifted data (x - K with K the channel's first
// value; Chan, Golub & LeVeque 1983), so one pass gives sum and sum of squares
// without the cancellation of the textbook formula.

#include <algorithm>
#include <cmath>

#include "runtime/check.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/vectorize.h"
#include "runtime/cpu/op_profile.h"

namespace mplan::rt::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kChunk = 1024;
// Channels per block: a block's planes of one image are contiguous, so the passes
// walk memory in order (channel by channel would stride across the images).
constexpr int64_t kBlock = 64;

// sum(x - shift) and sum((x - shift)^2) over count <= kChunk floats.
inline void shifted_chunk(const float* __restrict x, int64_t count, float shift, float* sum, float* squares) {
  float s[kLanes] = {}, q[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - shift;
      s[j] += d;
      q[j] += d * d;
    }
  for (int64_t j = 0; i + j < count; ++j) {
    const float d = x[i + j] - shift;
    s[j] += d;
    q[j] += d * d;
  }
  float total_s = 0, total_q = 0;
  for (int64_t j = 0; j < kLanes; ++j) {
    total_s += s[j];
    total_q += q[j];
  }
  *sum = total_s;
  *squares = total_q;
}

// sum(dy) and sum(dy * (x - mean)) over count <= kChunk floats.
inline void gradient_chunk(const float* __restrict x, const float* __restrict dy, int64_t count, float mean,
                           float* sum_dy, float* sum_dy_xc) {
  float s[kLanes] = {}, t[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      s[j] += dy[i + j];
      t[j] += dy[i + j] * (x[i + j] - mean);
    }
  for (int64_t j = 0; i + j < count; ++j) {
    s[j] += dy[i + j];
    t[j] += dy[i + j] * (x[i + j] - mean);
  }
  float total_s = 0, total_t = 0;
  for (int64_t j = 0; j < kLanes; ++j) {
    total_s += s[j];
    total_t += t[j];
  }
  *sum_dy = total_s;
  *sum_dy_xc = total_t;
}

// For the `channels` planes of one image at x: sum[c] += sum(x - shift[c]),
// squares[c] += sum((x - shift[c])^2).
MPLAN_VECTOR_CLONES void block_shifted_sums(const float* __restrict x, int64_t channels, int64_t hw,
                                            const float* shift, double* sum, double* squares) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < hw; i += kChunk) {
      float s, q;
      shifted_chunk(x + c * hw + i, std::min(kChunk, hw - i), shift[c], &s, &q);
      sum[c] += s;
      squares[c] += q;
    }
}

// For the planes of one image: sum_dy[c] += sum(dy), sum_dy_xc[c] += sum(dy * (x - mean[c])).
MPLAN_VECTOR_CLONES void block_gradient_sums(const float* __restrict x, const float* __restrict dy, int64_t channels,
                                             int64_t hw, const float* mean, double* sum_dy, double* sum_dy_xc) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < hw; i += kChunk) {
      float s, t;
      gradient_chunk(x + c * hw + i, dy + c * hw + i, std::min(kChunk, hw - i), mean[c], &s, &t);
      sum_dy[c] += s;
      sum_dy_xc[c] += t;
    }
}

// y = (x - mean[c]) * scale[c] + shift[c] for the planes of one image.
MPLAN_VECTOR_CLONES void block_normalise(const float* __restrict x, float* __restrict y, int64_t channels, int64_t hw,
                                         const float* mean, const float* scale, const float* shift) {
  for (int64_t c = 0; c < channels; ++c) {
    const float m = mean[c], k = scale[c], b = shift[c];
    const float* xc = x + c * hw;
    float* yc = y + c * hw;
    for (int64_t i = 0; i < hw; ++i) yc[i] = (xc[i] - m) * k + b;
  }
}

// dx (=, or += when accumulate) a[c]*dy + b[c]*(x - mean[c]) + c0[c] for one image.
MPLAN_VECTOR_CLONES void block_input_gradient(const float* __restrict x, const float* __restrict dy,
                                              float* __restrict dx, int64_t channels, int64_t hw, const float* mean,
                                              const float* a, const float* b, const float* c0, bool accumulate) {
  for (int64_t c = 0; c < channels; ++c) {
    const float m = mean[c], ka = a[c], kb = b[c], kc = c0[c];
    const float* xc = x + c * hw;
    const float* dyc = dy + c * hw;
    float* dxc = dx + c * hw;
    if (accumulate) {
      for (int64_t i = 0; i < hw; ++i) dxc[i] += ka * dyc[i] + kb * (xc[i] - m) + kc;
    } else {
      for (int64_t i = 0; i < hw; ++i) dxc[i] = ka * dyc[i] + kb * (xc[i] - m) + kc;
    }
  }
}

// The same with dx written over dy (batch norm's BP1 in place, the TDFG's
// OpSpec::bp1_in_place): each element read before it is written.
MPLAN_VECTOR_CLONES void block_input_gradient_in_place(const float* __restrict x, float* __restrict gradient,
                                                       int64_t channels, int64_t hw, const float* mean,
                                                       const float* a, const float* b, const float* c0) {
  for (int64_t c = 0; c < channels; ++c) {
    const float m = mean[c], ka = a[c], kb = b[c], kc = c0[c];
    const float* xc = x + c * hw;
    float* gc = gradient + c * hw;
    for (int64_t i = 0; i < hw; ++i) gc[i] = ka * gc[i] + kb * (xc[i] - m) + kc;
  }
}

// One block of channels [c0, c0 + cb): their gradient sums, sum(dy) and sum(dy * x_hat).
struct BlockGradientSums {
  double sum_dy[kBlock] = {}, sum_dy_xhat[kBlock] = {};
  float mean[kBlock];
  BlockGradientSums(const float* x, const float* dy, const float* save_mean, const float* save_invstd, int64_t n,
                    int64_t c, int64_t hw, int64_t c0, int64_t cb) {
    for (int64_t j = 0; j < cb; ++j) mean[j] = save_mean[c0 + j];
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + c0) * hw;
      block_gradient_sums(x + at, dy + at, cb, hw, mean, sum_dy, sum_dy_xhat);
    }
    for (int64_t j = 0; j < cb; ++j) sum_dy_xhat[j] *= save_invstd[c0 + j];
  }
};

// dx of a block from its gradient sums: dx = gamma*invstd/M * (M*dy - sum(dy) -
// x_hat*sum(dy*x_hat)), M = n*hw, as a*dy + b*(x - mean) + c.
void block_dx(const float* x, const float* dy, float* dx, const float* gamma, const float* save_invstd,
              const BlockGradientSums& sums, int64_t n, int64_t c, int64_t hw, int64_t c0, int64_t cb,
              bool accumulate) {
  const double count = static_cast<double>(n * hw);
  float a[kBlock], b[kBlock], c_term[kBlock];
  for (int64_t j = 0; j < cb; ++j) {
    const double invstd = save_invstd[c0 + j], k = gamma[c0 + j] * invstd;
    a[j] = static_cast<float>(k);
    b[j] = static_cast<float>(-k * invstd * (sums.sum_dy_xhat[j] / count));
    c_term[j] = static_cast<float>(-k * (sums.sum_dy[j] / count));
  }
  const bool in_place = dx == dy;
  MPLAN_RT_CHECK(!(in_place && accumulate), "batch norm's BP1 adds dx to the dy it overwrites");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (i * c + c0) * hw;
    if (in_place)
      block_input_gradient_in_place(x + at, dx + at, cb, hw, sums.mean, a, b, c_term);
    else
      block_input_gradient(x + at, dy + at, dx + at, cb, hw, sums.mean, a, b, c_term, accumulate);
  }
}

}  // namespace

void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                             float momentum) {
  OpTimer timer(OpKind::batchnorm);
  const int64_t count = n * hw;
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    float shift[kBlock], mean_f[kBlock], scale[kBlock];
    double sum[kBlock] = {}, squares[kBlock] = {};
    for (int64_t j = 0; j < cb; ++j) shift[j] = x[(c0 + j) * hw];
    for (int64_t b = 0; b < n; ++b) block_shifted_sums(x + (b * c + c0) * hw, cb, hw, shift, sum, squares);
    for (int64_t j = 0; j < cb; ++j) {
      const int64_t ch = c0 + j;
      const double shifted_mean = sum[j] / count;
      const double mean = shift[j] + shifted_mean;
      const double centred = std::max(0.0, squares[j] - shifted_mean * sum[j]);  // sum of (x - mean)^2
      const double var_biased = centred / count;
      const double invstd = 1.0 / std::sqrt(var_biased + eps);
      save_mean[ch] = static_cast<float>(mean);
      save_invstd[ch] = static_cast<float>(invstd);
      // PyTorch updates the running variance with the unbiased estimate.
      const double var_unbiased = count > 1 ? centred / (count - 1) : var_biased;
      running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
      running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var_unbiased);
      // y from the statistics as saved (rounded to float), so that
      // batchnorm_forward_saved recomputes exactly this y.
      mean_f[j] = save_mean[ch];
      scale[j] = static_cast<float>(gamma[ch] * static_cast<double>(save_invstd[ch]));
    }
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + c0) * hw;
      block_normalise(x + at, y + at, cb, hw, mean_f, scale, beta + c0);
    }
  }
}

void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    float scale[kBlock];
    for (int64_t j = 0; j < cb; ++j) scale[j] = static_cast<float>(gamma[c0 + j] * static_cast<double>(save_invstd[c0 + j]));
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + c0) * hw;
      block_normalise(x + at, y + at, cb, hw, save_mean + c0, scale, beta + c0);
    }
  }
}

void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 int64_t n, int64_t c, int64_t hw, float eps) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    float scale[kBlock];
    for (int64_t j = 0; j < cb; ++j)
      scale[j] = static_cast<float>(gamma[c0 + j] / std::sqrt(static_cast<double>(running_var[c0 + j]) + eps));
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + c0) * hw;
      block_normalise(x + at, y + at, cb, hw, running_mean + c0, scale, beta + c0);
    }
  }
}

void batchnorm_backward(const float* x, const float* gamma, const float* save_mean,
                        const float* save_invstd, const float* dy, float* dx, float* dgamma,
                        float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate_dx,
                        bool accumulate_params) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    const BlockGradientSums sums(x, dy, save_mean, save_invstd, n, c, hw, c0, cb);
    for (int64_t j = 0; j < cb; ++j) {
      dgamma[c0 + j] = static_cast<float>(accumulate_params ? dgamma[c0 + j] + sums.sum_dy_xhat[j] : sums.sum_dy_xhat[j]);
      dbeta[c0 + j] = static_cast<float>(accumulate_params ? dbeta[c0 + j] + sums.sum_dy[j] : sums.sum_dy[j]);
    }
    block_dx(x, dy, dx, gamma, save_invstd, sums, n, c, hw, c0, cb, accumulate_dx);
  }
}

void batchnorm_backward_data(const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, int64_t n,
                             int64_t c, int64_t hw, bool accumulate) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    const BlockGradientSums sums(x, dy, save_mean, save_invstd, n, c, hw, c0, cb);
    block_dx(x, dy, dx, gamma, save_invstd, sums, n, c, hw, c0, cb, accumulate);
  }
}

void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c,
                               int64_t hw, bool accumulate) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t cb = std::min(kBlock, c - c0);
    const BlockGradientSums sums(x, dy, save_mean, save_invstd, n, c, hw, c0, cb);
    for (int64_t j = 0; j < cb; ++j) {
      dgamma[c0 + j] = static_cast<float>(accumulate ? dgamma[c0 + j] + sums.sum_dy_xhat[j] : sums.sum_dy_xhat[j]);
      dbeta[c0 + j] = static_cast<float>(accumulate ? dbeta[c0 + j] + sums.sum_dy[j] : sums.sum_dy[j]);
    }
  }
}

}  // namespace mplan::rt::cpu
