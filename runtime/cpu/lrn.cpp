// Local response normalisation across channels with PyTorch's semantics
// (torch.nn.LocalResponseNorm: x^2 averaged over a window of `size` channels,
// zero-padded by size/2 before and (size-1)/2 after, so alpha is divided by size):
//   scale_c = k + alpha/size * sum_{c' = c - size/2}^{c + (size-1)/2} x_{c'}^2
//   y_c = x_c * scale_c^-beta
// Backward: dx_i = dy_i * scale_i^-beta
//   - 2*alpha*beta/size * x_i * sum over j whose window holds i of dy_j x_j scale_j^(-beta-1)
//
// Both directions work one pixel column (the c values of one pixel) at a time with
// running window sums in double, so they need no scratch memory whatever c and size.

#include <algorithm>
#include <cmath>

#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {
namespace {

// One pixel column: x[ch * stride] for ch in [0, c).
struct Column {
  const float* x;
  int64_t stride, c, before, after;
  double k, alpha_over_size;

  double square(int64_t ch) const {
    const double v = x[ch * stride];
    return v * v;
  }
  // scale of channel ch, from its window's squares.
  double scale(int64_t ch) const {
    double sum = 0.0;
    for (int64_t j = std::max<int64_t>(ch - before, 0); j <= std::min(ch + after, c - 1); ++j) sum += square(j);
    return k + alpha_over_size * sum;
  }
};

}  // namespace

void lrn_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k) {
  OpTimer timer(OpKind::lrn);
  const int64_t before = size / 2, after = (size - 1) / 2;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) {
      const Column col{x + b * c * hw + i, hw, c, before, after, k, static_cast<double>(alpha) / size};
      // Running sum of the squares in channel ch's window.
      double sum = 0.0;
      for (int64_t j = 0; j <= std::min(after, c - 1); ++j) sum += col.square(j);
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t at = (b * c + ch) * hw + i;
        y[at] = static_cast<float>(x[at] * std::pow(k + col.alpha_over_size * sum, -static_cast<double>(beta)));
        if (ch + after + 1 < c) sum += col.square(ch + after + 1);
        if (ch - before >= 0) sum -= col.square(ch - before);
      }
    }
}

void lrn_backward(const float* x, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                  int64_t size, float alpha, float beta, float k, bool accumulate) {
  OpTimer timer(OpKind::lrn);
  const int64_t before = size / 2, after = (size - 1) / 2;
  const double coefficient = 2.0 * alpha * beta / size;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) {
      const Column col{x + b * c * hw + i, hw, c, before, after, k, static_cast<double>(alpha) / size};
      const float* dys = dy + b * c * hw + i;
      // t_j = dy_j * x_j * scale_j^(-beta-1)
      auto t = [&](int64_t j) {
        return dys[j * hw] * static_cast<double>(col.x[j * hw]) * std::pow(col.scale(j), -static_cast<double>(beta) - 1.0);
      };
      // Channel ch lies in the window of j iff j - before <= ch <= j + after: a running
      // sum of t over j in [ch - after, ch + before].
      double window = 0.0;
      for (int64_t j = 0; j <= std::min(before, c - 1); ++j) window += t(j);
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t at = (b * c + ch) * hw + i;
        const double g = dy[at] * std::pow(col.scale(ch), -static_cast<double>(beta)) - coefficient * x[at] * window;
        dx[at] = static_cast<float>(accumulate ? dx[at] + g : g);
        if (ch + before + 1 < c) window += t(ch + before + 1);
        if (ch - after >= 0) window -= t(ch - after);
      }
    }
}

}  // namespace mplan::rt::cpu
