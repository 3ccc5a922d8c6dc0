// The activations of runtime/ops_activations.h, element by element, with
// PyTorch's CPU formulas (aten/src/ATen/native/cpu/Activation.cpp), in float
// as PyTorch computes them.

#include <algorithm>
#include <cmath>

#include "runtime/cpu/activation_kernels.h"

namespace mplan::rt::cpu {
namespace {

// dx = g, or dx += g.
inline void store(float* dx, int64_t i, float g, bool accumulate) { dx[i] = accumulate ? dx[i] + g : g; }

inline float sigmoid_of(float x) { return 1.0f / (1.0f + std::exp(-x)); }

constexpr float kSqrtHalf = 0.70710678118654752440f;    // 1/sqrt(2)
constexpr float kInvSqrtTwoPi = 0.39894228040143267794f;  // 1/sqrt(2*pi)
constexpr float kTanhBeta = 0.79788456080286535588f;      // sqrt(2/pi)
constexpr float kTanhKappa = 0.044715f;

}  // namespace

void hardswish_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] * std::min(std::max(x[i] + 3.0f, 0.0f), 6.0f) / 6.0f;
}

void hardswish_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = x[i] < -3.0f ? 0.0f : x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i];
    store(dx, i, g, accumulate);
  }
}

void hardsigmoid_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(x[i] + 3.0f, 0.0f), 6.0f) / 6.0f;
}

void hardsigmoid_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) store(dx, i, (x[i] > -3.0f && x[i] < 3.0f) ? dy[i] / 6.0f : 0.0f, accumulate);
}

void silu_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void silu_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    const float s = sigmoid_of(x[i]);
    store(dx, i, dy[i] * s * (1.0f + x[i] * (1.0f - s)), accumulate);
  }
}

void sigmoid_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = sigmoid_of(x[i]);
}

void sigmoid_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) store(dx, i, dy[i] * (1.0f - y[i]) * y[i], accumulate);
}

void gelu_forward(const float* x, float* y, int64_t count, bool tanh_approximation) {
  if (tanh_approximation) {
    for (int64_t i = 0; i < count; ++i) {
      const float inner = kTanhBeta * (x[i] + kTanhKappa * x[i] * x[i] * x[i]);
      y[i] = 0.5f * x[i] * (1.0f + std::tanh(inner));
    }
  } else {
    for (int64_t i = 0; i < count; ++i) y[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * kSqrtHalf));
  }
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t count, bool tanh_approximation,
                   bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    float g;
    if (tanh_approximation) {
      const float x_sq = x[i] * x[i];
      const float inner = kTanhBeta * (x[i] + kTanhKappa * x_sq * x[i]);
      const float t = std::tanh(inner);
      const float left_derivative = 0.5f * (1.0f + t);
      const float right_derivative = 0.5f * x[i] * (1.0f - t * t) * kTanhBeta * (1.0f + 3.0f * kTanhKappa * x_sq);
      g = dy[i] * (left_derivative + right_derivative);
    } else {
      const float cdf = 0.5f * (1.0f + std::erf(x[i] * kSqrtHalf));
      const float pdf = std::exp(-0.5f * x[i] * x[i]) * kInvSqrtTwoPi;
      g = dy[i] * (cdf + x[i] * pdf);
    }
    store(dx, i, g, accumulate);
  }
}

void clip_forward(const float* x, float* y, int64_t count, float min, float max) {
  for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(x[i], min), max);
}

void clip_backward(const float* y, const float* dy, float* dx, int64_t count, float min, float max, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) store(dx, i, (y[i] > min && y[i] < max) ? dy[i] : 0.0f, accumulate);
}

}  // namespace mplan::rt::cpu
