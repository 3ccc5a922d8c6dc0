// The activations (activation_kernels.h), one thread per element, with the
// CPU kernels' formulas (runtime/cpu/activations.cpp).

#include "runtime/cuda/activation_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrtTwoPi = 0.39894228040143267794f;
constexpr float kTanhBeta = 0.79788456080286535588f;
constexpr float kTanhKappa = 0.044715f;

__device__ __forceinline__ float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ float forward_of(Activation f, float x, float low, float high) {
  switch (f) {
    case Activation::hardswish: return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Activation::hardsigmoid: return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Activation::silu: return x / (1.0f + expf(-x));
    case Activation::sigmoid: return sigmoid_of(x);
    case Activation::gelu: return x * 0.5f * (1.0f + erff(x * kSqrtHalf));
    case Activation::gelu_tanh: return 0.5f * x * (1.0f + tanhf(kTanhBeta * (x + kTanhKappa * x * x * x)));
    case Activation::clip: return x != x ? x : fminf(fmaxf(x, low), high);  // NaN stays NaN, as on the CPU
  }
  return x;
}

// The derivative times dy, from the input x or (sigmoid, clip) the output y.
__device__ float backward_of(Activation f, float in, float g, float low, float high) {
  switch (f) {
    case Activation::hardswish: return in < -3.0f ? 0.0f : in <= 3.0f ? g * (in / 3.0f + 0.5f) : g;
    case Activation::hardsigmoid: return (in > -3.0f && in < 3.0f) ? g / 6.0f : 0.0f;
    case Activation::silu: {
      const float s = sigmoid_of(in);
      return g * s * (1.0f + in * (1.0f - s));
    }
    case Activation::sigmoid: return g * (1.0f - in) * in;
    case Activation::gelu: {
      const float cdf = 0.5f * (1.0f + erff(in * kSqrtHalf));
      const float pdf = expf(-0.5f * in * in) * kInvSqrtTwoPi;
      return g * (cdf + in * pdf);
    }
    case Activation::gelu_tanh: {
      const float x_sq = in * in;
      const float t = tanhf(kTanhBeta * (in + kTanhKappa * x_sq * in));
      const float left = 0.5f * (1.0f + t);
      const float right = 0.5f * in * (1.0f - t * t) * kTanhBeta * (1.0f + 3.0f * kTanhKappa * x_sq);
      return g * (left + right);
    }
    case Activation::clip: return (in > low && in < high) ? g : 0.0f;
  }
  return g;
}

__global__ void forward_kernel(Activation f, const float* x, float* y, int64_t count, float low, float high) {
  MPLAN_FOR_EACH(i, count) y[i] = forward_of(f, x[i], low, high);
}

__global__ void backward_kernel(Activation f, const float* in, const float* dy, float* dx, int64_t count, float low,
                                float high, bool accumulate) {
  MPLAN_FOR_EACH(i, count) {
    const float g = backward_of(f, in[i], dy[i], low, high);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

}  // namespace

void activation_forward(Activation f, const float* x, float* y, int64_t count, float low, float high,
                        cudaStream_t stream) {
  if (count <= 0) return;
  forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(f, x, y, count, low, high);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void activation_backward(Activation f, const float* in, const float* dy, float* dx, int64_t count, float low,
                         float high, bool accumulate, cudaStream_t stream) {
  if (count <= 0) return;
  backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(f, in, dy, dx, count, low, high, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
