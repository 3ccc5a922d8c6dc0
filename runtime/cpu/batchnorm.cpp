// Batch normalisation, PyTorch semantics (torch.nn.BatchNorm2d in training mode;
// Ioffe & Szegedy 2015, Algorithm 1 and the backward pass of §3).
//
// Numerics: element-wise work is in float; every per-channel sum is accumulated in
// double from float partial sums over chunks of at most kChunk elements of one
// plane (16 independent lanes, so the loops vectorise and the order is the same on
// every CPU). The variance uses shifted data (x - K with K the channel's first
// value; Chan, Golub & LeVeque 1983), so one pass gives sum and sum of squares
// without the cancellation of the textbook formula.

#include <cmath>

#include "runtime/cpu/vectorize.h"
#include "runtime/op_profile.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kChunk = 1024;

struct Sums {
  double a = 0, b = 0;
};

// sum(x - shift) and sum((x - shift)^2) over count <= kChunk floats.
MPLAN_VECTOR_CLONES void shifted_sums(const float* __restrict x, int64_t count, float shift, float* sum,
                                      float* squares) {
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
MPLAN_VECTOR_CLONES void gradient_sums(const float* __restrict x, const float* __restrict dy, int64_t count,
                                       float mean, float* sum_dy, float* sum_dy_xc) {
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

// y = (x - mean) * scale + shift.
MPLAN_VECTOR_CLONES void normalise(const float* __restrict x, float* __restrict y, int64_t count, float mean,
                                   float scale, float shift) {
  for (int64_t i = 0; i < count; ++i) y[i] = (x[i] - mean) * scale + shift;
}

// dx (=, or += when accumulate) a*dy + b*(x - mean) + c.
MPLAN_VECTOR_CLONES void input_gradient(const float* __restrict x, const float* __restrict dy, float* __restrict dx,
                                        int64_t count, float mean, float a, float b, float c, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < count; ++i) dx[i] += a * dy[i] + b * (x[i] - mean) + c;
  } else {
    for (int64_t i = 0; i < count; ++i) dx[i] = a * dy[i] + b * (x[i] - mean) + c;
  }
}

// Per-channel sums over the n planes of channel ch, chunk by chunk.
template <class ChunkSums>
Sums channel_sums(int64_t n, int64_t c, int64_t hw, int64_t ch, ChunkSums&& chunk_sums) {
  Sums total;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t plane = (b * c + ch) * hw;
    for (int64_t i = 0; i < hw; i += kChunk) {
      float first = 0, second = 0;
      chunk_sums(plane + i, std::min(kChunk, hw - i), &first, &second);
      total.a += first;
      total.b += second;
    }
  }
  return total;
}

// sum(dy) and sum(dy * x_hat) of channel ch.
Sums gradient_channel_sums(const float* x, const float* dy, float mean, double invstd, int64_t n, int64_t c,
                           int64_t hw, int64_t ch) {
  Sums sums = channel_sums(n, c, hw, ch, [&](int64_t at, int64_t count, float* s, float* t) {
    gradient_sums(x + at, dy + at, count, mean, s, t);
  });
  sums.b *= invstd;
  return sums;
}

// dx of channel ch from its gradient sums: dx = gamma*invstd/M * (M*dy - sum(dy) -
// x_hat*sum(dy*x_hat)), M = n*hw.
void channel_input_gradient(const float* x, const float* dy, float* dx, float gamma, float mean, double invstd,
                            const Sums& sums, int64_t n, int64_t c, int64_t hw, int64_t ch, bool accumulate) {
  const double count = static_cast<double>(n * hw);
  const double k = gamma * invstd;
  const float a = static_cast<float>(k);
  const float b = static_cast<float>(-k * invstd * (sums.b / count));
  const float c0 = static_cast<float>(-k * (sums.a / count));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (i * c + ch) * hw;
    input_gradient(x + at, dy + at, dx + at, hw, mean, a, b, c0, accumulate);
  }
}

}  // namespace

void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                             float momentum) {
  OpTimer timer(OpKind::batchnorm);
  const int64_t count = n * hw;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float shift = x[ch * hw];
    const Sums sums = channel_sums(n, c, hw, ch, [&](int64_t at, int64_t len, float* s, float* q) {
      shifted_sums(x + at, len, shift, s, q);
    });
    const double shifted_mean = sums.a / count;
    const double mean = shift + shifted_mean;
    const double squares = std::max(0.0, sums.b - shifted_mean * sums.a);  // sum of (x - mean)^2
    const double var_biased = squares / count;
    const double invstd = 1.0 / std::sqrt(var_biased + eps);
    save_mean[ch] = static_cast<float>(mean);
    save_invstd[ch] = static_cast<float>(invstd);
    // PyTorch updates the running variance with the unbiased estimate.
    const double var_unbiased = count > 1 ? squares / (count - 1) : var_biased;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] =
        static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var_unbiased);
    const float scale = static_cast<float>(gamma[ch] * invstd);
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + ch) * hw;
      normalise(x + at, y + at, hw, static_cast<float>(mean), scale, beta[ch]);
    }
  }
}

void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 int64_t n, int64_t c, int64_t hw, float eps) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[ch]) + eps);
    const float scale = static_cast<float>(gamma[ch] * invstd);
    for (int64_t b = 0; b < n; ++b) {
      const int64_t at = (b * c + ch) * hw;
      normalise(x + at, y + at, hw, running_mean[ch], scale, beta[ch]);
    }
  }
}

void batchnorm_backward(const float* x, const float* gamma, const float* save_mean,
                        const float* save_invstd, const float* dy, float* dx, float* dgamma,
                        float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate_dx,
                        bool accumulate_params) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double invstd = save_invstd[ch];
    const Sums sums = gradient_channel_sums(x, dy, save_mean[ch], invstd, n, c, hw, ch);
    dgamma[ch] = static_cast<float>(accumulate_params ? dgamma[ch] + sums.b : sums.b);
    dbeta[ch] = static_cast<float>(accumulate_params ? dbeta[ch] + sums.a : sums.a);
    channel_input_gradient(x, dy, dx, gamma[ch], save_mean[ch], invstd, sums, n, c, hw, ch, accumulate_dx);
  }
}

void batchnorm_backward_data(const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, int64_t n,
                             int64_t c, int64_t hw, bool accumulate) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double invstd = save_invstd[ch];
    const Sums sums = gradient_channel_sums(x, dy, save_mean[ch], invstd, n, c, hw, ch);
    channel_input_gradient(x, dy, dx, gamma[ch], save_mean[ch], invstd, sums, n, c, hw, ch, accumulate);
  }
}

void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c,
                               int64_t hw, bool accumulate) {
  OpTimer timer(OpKind::batchnorm);
  for (int64_t ch = 0; ch < c; ++ch) {
    const Sums sums = gradient_channel_sums(x, dy, save_mean[ch], save_invstd[ch], n, c, hw, ch);
    dgamma[ch] = static_cast<float>(accumulate ? dgamma[ch] + sums.b : sums.b);
    dbeta[ch] = static_cast<float>(accumulate ? dbeta[ch] + sums.a : sums.a);
  }
}

}  // namespace mplan::rt
