// Batch normalisation kernels of the CUDA backend, as runtime/cpu/batchnorm.cpp
// and batchnorm_split.cpp (PyTorch's BatchNorm2d in training mode; Ioffe &
// Szegedy 2015, Algorithm 1 and §3): per-channel sums in double, one block per
// channel (deterministic: no atomics), and element-wise kernels over a grid
// whose y index is the channel. The training forward runs on cuDNN
// (ops.cpp); the kernel here is its stand-in for channels of a single value.

#include "runtime/check.h"
#include "runtime/cuda/channel_reduce.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// kLoadsInFlight: each thread issues the loads of this many values before it
// adds them (in the same order: the sums are unchanged per thread);
// kReduceThreads, block_sum and ChannelWalk: channel_reduce.cuh.
constexpr int kLoadsInFlight = 4;

// The next up to kLoadsInFlight elements of a walk: their indices in at[], -1
// past the walk's end (a walk that ended stays ended, so the valid ones come
// first); the walk moves past them. Static indices only, so at[] stays in
// registers.
__device__ __forceinline__ void take(ChannelWalk& v, int64_t (&at)[kLoadsInFlight]) {
#pragma unroll
  for (int u = 0; u < kLoadsInFlight; ++u)
    if (v.more()) {
      at[u] = v.at();
      v.next();
    } else {
      at[u] = -1;
    }
}

// add(x[j]) for the values of a walk, in its order, kLoadsInFlight loads issued
// before their adds.
template <typename Add>
__device__ __forceinline__ void for_each_value(const float* x, ChannelWalk v, Add add) {
  int64_t at[kLoadsInFlight];
  float xs[kLoadsInFlight];
  while (v.more()) {
    take(v, at);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (at[u] >= 0) xs[u] = x[at[u]];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (at[u] >= 0) add(xs[u]);
  }
}

// Saves mean and 1/sqrt(biased var + eps) and updates the running statistics
// (the running variance from the unbiased variance), as the CPU.
__global__ void __launch_bounds__(kReduceThreads, 1)
    batchnorm_stats_kernel(const float* x, float* save_mean, float* save_invstd, float* running_mean,
                           float* running_var, int64_t n, int64_t c, int64_t hw, float eps, float momentum) {
  const int64_t ch = blockIdx.x, count = n * hw;
  double sum = 0.0;
  for_each_value(x, ChannelWalk(threadIdx.x, blockDim.x, n, c, ch, hw), [&](float value) { sum += value; });
  const double mean = block_sum(sum) / count;
  double squares = 0.0;
  for_each_value(x, ChannelWalk(threadIdx.x, blockDim.x, n, c, ch, hw), [&](float value) {
    const double d = value - mean;
    squares += d * d;
  });
  squares = block_sum(squares);
  if (threadIdx.x != 0) return;
  const double var_biased = squares / count;
  save_mean[ch] = static_cast<float>(mean);
  save_invstd[ch] = static_cast<float>(1.0 / sqrt(var_biased + eps));
  const double var_unbiased = count > 1 ? squares / (count - 1) : var_biased;
  running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
  running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var_unbiased);
}

// y = x * scale + shift with the CPU's float scale and shift from the saved
// statistics (batchnorm_split.cpp), so the recomputed y is the CPU's to the bit.
__global__ void batchnorm_apply_kernel(const float* x, const float* gamma, const float* beta, const float* save_mean,
                                       const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw) {
  const int64_t ch = blockIdx.y;
  const double mean = save_mean[ch], invstd = save_invstd[ch];
  const float scale = static_cast<float>(gamma[ch] * invstd);
  const float shift = static_cast<float>(beta[ch] - mean * gamma[ch] * invstd);
  for (ChannelWalk v(blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
                     static_cast<int64_t>(blockDim.x) * gridDim.x, n, c, ch, hw);
       v.more(); v.next()) {
    const int64_t at = v.at();
    y[at] = __fadd_rn(__fmul_rn(x[at], scale), shift);
  }
}

// Evaluation mode: the running statistics in place of the batch's.
__global__ void batchnorm_inference_kernel(const float* x, const float* gamma, const float* beta,
                                           const float* running_mean, const float* running_var, float* y, int64_t n,
                                           int64_t c, int64_t hw, float eps) {
  const int64_t ch = blockIdx.y;
  const float scale = static_cast<float>(gamma[ch] / sqrt(static_cast<double>(running_var[ch]) + eps));
  const float mean = running_mean[ch];
  for (ChannelWalk v(blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
                     static_cast<int64_t>(blockDim.x) * gridDim.x, n, c, ch, hw);
       v.more(); v.next()) {
    const int64_t at = v.at();
    y[at] = __fadd_rn(__fmul_rn(__fsub_rn(x[at], mean), scale), beta[ch]);
  }
}

// Per channel: sum(dy * x_hat) into dgamma and sum(dy) into dbeta, written or
// added (the CPU's batchnorm_backward_params).
__global__ void __launch_bounds__(kReduceThreads, 1)
    batchnorm_param_sums_kernel(const float* x, const float* save_mean, const float* save_invstd, const float* dy,
                                float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate) {
  const int64_t ch = blockIdx.x;
  const double mean = save_mean[ch], invstd = save_invstd[ch];
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  int64_t at[kLoadsInFlight];
  float xs[kLoadsInFlight], dys[kLoadsInFlight];
  for (ChannelWalk v(threadIdx.x, blockDim.x, n, c, ch, hw); v.more();) {
    take(v, at);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (at[u] >= 0) {
        xs[u] = x[at[u]];
        dys[u] = dy[at[u]];
      }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (at[u] >= 0) {
        sum_dy += dys[u];
        sum_dy_xhat += dys[u] * (xs[u] - mean) * invstd;
      }
  }
  sum_dy = block_sum(sum_dy);
  sum_dy_xhat = block_sum(sum_dy_xhat);
  if (threadIdx.x != 0) return;
  dgamma[ch] = static_cast<float>(accumulate ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
  dbeta[ch] = static_cast<float>(accumulate ? dbeta[ch] + sum_dy : sum_dy);
}

// dx = gamma*invstd * (dy - mean(dy) - x_hat * mean(dy*x_hat)) (batchnorm.cpp).
__global__ void batchnorm_dx_kernel(const float* x, const float* gamma, const float* save_mean,
                                    const float* save_invstd, const float* dy, const float* sum_dy_xhat,
                                    const float* sum_dy, float* dx, int64_t n, int64_t c, int64_t hw,
                                    bool accumulate) {
  const int64_t ch = blockIdx.y, count = n * hw;
  const double mean = save_mean[ch], invstd = save_invstd[ch];
  const double mean_dy = static_cast<double>(sum_dy[ch]) / count;
  const double mean_dy_xhat = static_cast<double>(sum_dy_xhat[ch]) / count;
  const double k = gamma[ch] * invstd;
  for (ChannelWalk v(blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
                     static_cast<int64_t>(blockDim.x) * gridDim.x, n, c, ch, hw);
       v.more(); v.next()) {
    const int64_t at = v.at();
    const double xhat = (x[at] - mean) * invstd;
    const float g = static_cast<float>(k * (dy[at] - mean_dy - xhat * mean_dy_xhat));
    dx[at] = accumulate ? __fadd_rn(dx[at], g) : g;
  }
}

// A grid for the element-wise kernels: y = the channel, x = enough blocks to
// give the device some hundreds of blocks in all.
dim3 channel_grid(int64_t n, int64_t c, int64_t hw) {
  MPLAN_RT_CHECK(c <= 65535, "batch norm over more than 65535 channels");
  int64_t per_channel = (n * hw + kThreads - 1) / kThreads;
  const int64_t wanted = (1024 + c - 1) / c;
  if (per_channel > wanted) per_channel = wanted;
  if (per_channel < 1) per_channel = 1;
  return dim3(static_cast<unsigned>(per_channel), static_cast<unsigned>(c));
}

}  // namespace

void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                             float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c,
                             int64_t hw, float eps, float momentum, cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  batchnorm_stats_kernel<<<static_cast<unsigned>(c), kReduceThreads, 0, stream>>>(
      x, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps, momentum);
  MPLAN_CUDA_CHECK_LAUNCH();
  batchnorm_forward_saved(x, gamma, beta, save_mean, save_invstd, y, n, c, hw, stream);
}

void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw,
                             cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  batchnorm_apply_kernel<<<channel_grid(n, c, hw), kThreads, 0, stream>>>(x, gamma, beta, save_mean, save_invstd, y,
                                                                          n, c, hw);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta, const float* running_mean,
                                 const float* running_var, float* y, int64_t n, int64_t c, int64_t hw, float eps,
                                 cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  batchnorm_inference_kernel<<<channel_grid(n, c, hw), kThreads, 0, stream>>>(x, gamma, beta, running_mean,
                                                                              running_var, y, n, c, hw, eps);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void batchnorm_backward_data(const float* x, const float* gamma, const float* save_mean, const float* save_invstd,
                             const float* dy, float* dx, float* workspace, int64_t n, int64_t c, int64_t hw,
                             bool accumulate, cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  float* sum_dy_xhat = workspace;
  float* sum_dy = workspace + c;
  batchnorm_param_sums_kernel<<<static_cast<unsigned>(c), kReduceThreads, 0, stream>>>(
      x, save_mean, save_invstd, dy, sum_dy_xhat, sum_dy, n, c, hw, /*accumulate=*/false);
  MPLAN_CUDA_CHECK_LAUNCH();
  batchnorm_dx_kernel<<<channel_grid(n, c, hw), kThreads, 0, stream>>>(x, gamma, save_mean, save_invstd, dy,
                                                                       sum_dy_xhat, sum_dy, dx, n, c, hw, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  batchnorm_param_sums_kernel<<<static_cast<unsigned>(c), kReduceThreads, 0, stream>>>(
      x, save_mean, save_invstd, dy, dgamma, dbeta, n, c, hw, /*accumulate=*/true);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
