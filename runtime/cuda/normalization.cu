// Layer normalisation and row softmax (normalization_kernels.h), as
// runtime/cpu/layernorm.cpp and runtime/cpu/attention.cpp: one thread per
// normalised position (per row), statistics in double; the parameter
// gradients one block per channel.

#include "runtime/cuda/channel_reduce.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/normalization_kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// Position p = (o, i) of x (outer, c, inner): element ch at (o * c + ch) * inner + i.
__global__ void layernorm_forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                         float* invstd, int64_t outer, int64_t c, int64_t inner, float eps) {
  MPLAN_FOR_EACH(p, outer * inner) {
    const int64_t base = (p / inner) * c * inner + p % inner;
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t ch = 0; ch < c; ++ch) {
      const double v = x[base + ch * inner];
      sum += v;
      sum_sq += v * v;
    }
    const double m = sum / c;
    const double var = fmax(sum_sq / c - m * m, 0.0);
    const float mf = static_cast<float>(m), sf = static_cast<float>(1.0 / sqrt(var + eps));
    mean[p] = mf;
    invstd[p] = sf;
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t at = base + ch * inner;
      y[at] = (x[at] - mf) * sf * gamma[ch] + beta[ch];
    }
  }
}

__global__ void layernorm_backward_data_kernel(const float* x, const float* gamma, const float* mean,
                                               const float* invstd, const float* dy, float* dx, int64_t outer,
                                               int64_t c, int64_t inner, bool accumulate) {
  MPLAN_FOR_EACH(p, outer * inner) {
    const int64_t base = (p / inner) * c * inner + p % inner;
    const double m = mean[p], s = invstd[p];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t at = base + ch * inner;
      const double g = static_cast<double>(dy[at]) * gamma[ch];
      sum_g += g;
      sum_gx += g * (x[at] - m) * s;
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t at = base + ch * inner;
      const double g = static_cast<double>(dy[at]) * gamma[ch];
      const double v = s * (g - sum_g / c - (x[at] - m) * s * sum_gx / c);
      dx[at] = static_cast<float>(accumulate ? dx[at] + v : v);
    }
  }
}

// A block per channel over every position (channel_reduce.cuh): one thread
// per channel left 768 threads of a GPU's tens of thousands looping over
// every token of a ViT's batch.
__global__ void __launch_bounds__(kReduceThreads, 1)
    layernorm_backward_params_kernel(const float* x, const float* mean, const float* invstd, const float* dy,
                                     float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  const int64_t ch = blockIdx.x;
  double sum_g = 0.0, sum_gx = 0.0;
  for (ChannelWalk v(threadIdx.x, blockDim.x, outer, c, ch, inner); v.more(); v.next()) {
    const int64_t at = v.at(), p = v.position();
    const double g = dy[at];
    sum_g += g;
    sum_gx += g * (static_cast<double>(x[at]) - mean[p]) * invstd[p];
  }
  sum_g = block_sum(sum_g);
  sum_gx = block_sum(sum_gx);
  if (threadIdx.x != 0) return;
  dgamma[ch] = static_cast<float>(dgamma[ch] + sum_gx);
  dbeta[ch] = static_cast<float>(dbeta[ch] + sum_g);
}

__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  MPLAN_FOR_EACH(r, rows) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float most = in[0];
    for (int64_t j = 1; j < cols; ++j) most = fmaxf(most, in[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float e = expf(in[j] - most);
      out[j] = e;
      sum += e;
    }
    const float inverse = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < cols; ++j) out[j] *= inverse;
  }
}

__global__ void softmax_rows_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                                             bool accumulate) {
  MPLAN_FOR_EACH(r, rows) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    float* out = dx + r * cols;
    double dot = 0.0;
    for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(gr[j]) * yr[j];
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < cols; ++j) {
      const float g = yr[j] * (gr[j] - d);
      out[j] = accumulate ? out[j] + g : g;
    }
  }
}

}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps, cudaStream_t stream) {
  if (outer * inner <= 0) return;
  layernorm_forward_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, gamma, beta, y, mean, invstd, outer,
                                                                                c, inner, eps);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate,
                             cudaStream_t stream) {
  if (outer * inner <= 0) return;
  layernorm_backward_data_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, gamma, mean, invstd, dy, dx,
                                                                                      outer, c, inner, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner,
                               cudaStream_t stream) {
  if (c <= 0) return;
  layernorm_backward_params_kernel<<<static_cast<unsigned>(c), kReduceThreads, 0, stream>>>(x, mean, invstd, dy, dgamma,
                                                                                          dbeta, outer, c, inner);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_rows_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, y, rows, cols);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void softmax_rows_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate,
                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_rows_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(y, dy, dx, rows, cols, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
