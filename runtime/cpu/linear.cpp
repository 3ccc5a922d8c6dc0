// Fully-connected layer with OpenBLAS SGEMM (cuBLAS on the CUDA backend).

#include <cblas.h>

#include <algorithm>

#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

void linear_forward(const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t in, int64_t out) {
  OpTimer timer(OpKind::linear);
  if (bias != nullptr) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < out; ++o) y[b * out + o] = bias[o];
  }
  // y (n x out) = x (n x in) * w^T (in x out) [+ y]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in,
              bias != nullptr ? 1.0f : 0.0f, y, out);
}

void linear_backward_data(const float* w, const float* dy, float* dx, int64_t n, int64_t in,
                          int64_t out, bool accumulate) {
  OpTimer timer(OpKind::linear);
  // dx (n x in) = dy (n x out) * w (out x in)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
              accumulate ? 1.0f : 0.0f, dx, in);
}

void linear_backward_weights(const float* x, const float* dy, float* dw, int64_t n, int64_t in,
                             int64_t out, bool accumulate) {
  OpTimer timer(OpKind::linear);
  // dw (out x in) = dy^T (out x n) * x (n x in)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in,
              accumulate ? 1.0f : 0.0f, dw, in);
}

void linear_backward_bias(const float* dy, float* dbias, int64_t n, int64_t out, bool accumulate) {
  OpTimer timer(OpKind::linear);
  // Column sums in double, 256 columns at a time (row-wise, so the loop vectorises).
  constexpr int64_t kBlock = 256;
  double sum[kBlock];
  for (int64_t o0 = 0; o0 < out; o0 += kBlock) {
    const int64_t width = std::min(kBlock, out - o0);
    std::fill(sum, sum + width, 0.0);
    for (int64_t b = 0; b < n; ++b) {
      const float* row = dy + b * out + o0;
      for (int64_t o = 0; o < width; ++o) sum[o] += row[o];
    }
    for (int64_t o = 0; o < width; ++o)
      dbias[o0 + o] = static_cast<float>(accumulate ? dbias[o0 + o] + sum[o] : sum[o]);
  }
}

}  // namespace mplan::rt::cpu
