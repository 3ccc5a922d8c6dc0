#pragma once
// Helpers shared by the runtime tests: seeded random tensors, the relative
// difference used for "agrees within 1e-5", and central finite differences.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace mplan::rt::test {

inline std::vector<float> random_vector(size_t count, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|: the error relative to the reference's scale.
inline double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

// L(x) = sum_i weights_i * forward(x)_i; returns dL/dx by central differences
// with step eps. forward writes its output into the given vector.
inline std::vector<double> numeric_gradient(
    std::vector<float>& x, const std::vector<float>& weights,
    const std::function<void(std::vector<float>& out)>& forward, float eps) {
  std::vector<double> grad(x.size());
  std::vector<float> out(weights.size());
  auto loss = [&] {
    forward(out);
    double sum = 0.0;
    for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(weights[i]) * out[i];
    return sum;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + eps;
    double plus = loss();
    x[i] = saved - eps;
    double minus = loss();
    x[i] = saved;
    grad[i] = (plus - minus) / (2.0 * eps);
  }
  return grad;
}

// Largest violation of |analytic - numeric| <= abs_tol + rel_tol * |numeric|, as a
// ratio (<= 1 passes), so a failing test prints how far off it is.
inline double gradient_error_ratio(const std::vector<float>& analytic,
                                   const std::vector<double>& numeric, double abs_tol,
                                   double rel_tol) {
  double worst = 0.0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    double allowed = abs_tol + rel_tol * std::fabs(numeric[i]);
    worst = std::max(worst, std::fabs(analytic[i] - numeric[i]) / allowed);
  }
  return worst;
}

}  // namespace mplan::rt::test
