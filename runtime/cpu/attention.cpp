// Batched matrix multiply, softmax over the last axis, and multi-head scaled
// dot-product attention, with OpenBLAS SGEMMs (cuBLAS on the CUDA backend).

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "runtime/cpu/attention_kernels.h"

namespace mplan::rt::cpu {
namespace {

inline float beta_of(bool accumulate) { return accumulate ? 1.0f : 0.0f; }

// One row of softmax in place-safe form: y = exp(x - max) / sum.
void softmax_row(const float* x, float* y, int64_t cols) {
  float most = x[0];
  for (int64_t j = 1; j < cols; ++j) most = std::max(most, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < cols; ++j) {
    y[j] = std::exp(x[j] - most);
    sum += y[j];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < cols; ++j) y[j] *= inverse;
}

}  // namespace

void matmul_forward(const float* a, const float* b, float* y, int64_t batch, int64_t m, int64_t k, int64_t n,
                    bool transpose_b) {
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a + i * m * k,
                k, b + i * k * n, transpose_b ? k : n, 0.0f, y + i * m * n, n);
}

void matmul_backward_a(const float* b, const float* dy, float* da, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate) {
  // da (m, k) = dy (m, n) @ b^T, b (k, n); or dy @ b, b (n, k).
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasNoTrans : CblasTrans, m, k, n, 1.0f, dy + i * m * n,
                n, b + i * k * n, transpose_b ? k : n, beta_of(accumulate), da + i * m * k, k);
}

void matmul_backward_b(const float* a, const float* dy, float* db, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate) {
  for (int64_t i = 0; i < batch; ++i) {
    if (transpose_b)  // db (n, k) = dy^T (n, m) @ a (m, k)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, dy + i * m * n, n, a + i * m * k, k,
                  beta_of(accumulate), db + i * k * n, k);
    else  // db (k, n) = a^T (k, m) @ dy (m, n)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, a + i * m * k, k, dy + i * m * n, n,
                  beta_of(accumulate), db + i * k * n, n);
  }
}

void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, y + r * cols, cols);
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
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

void attention_forward(const float* q, const float* k, const float* v, float* probs, float* y, int64_t n,
                       int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride,
                       float scale) {
  const int64_t dim = heads * head_dim;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q + b * tq * q_stride + h * head_dim;
      const float* kh = k + b * tk * kv_stride + h * head_dim;
      const float* vh = v + b * tk * kv_stride + h * head_dim;
      float* p = probs + (b * heads + h) * tq * tk;
      // S = scale * Q K^T, then softmax over the keys.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, tk, head_dim, scale, qh, q_stride, kh, kv_stride, 0.0f,
                  p, tk);
      for (int64_t t = 0; t < tq; ++t) softmax_row(p + t * tk, p + t * tk, tk);
      // Y_h = P V_h.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, head_dim, tk, 1.0f, p, tk, vh, kv_stride, 0.0f,
                  y + b * tq * dim + h * head_dim, dim);
    }
}

void attention_backward(const float* q, const float* k, const float* v, const float* probs, const float* dy,
                        float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads, int64_t tq,
                        int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v) {
  const int64_t dim = heads * head_dim;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t q_at = b * tq * q_stride + h * head_dim, kv_at = b * tk * kv_stride + h * head_dim;
      const float* p = probs + (b * heads + h) * tq * tk;
      const float* gy = dy + b * tq * dim + h * head_dim;
      float* ds = scratch;  // (tq, tk): dP, then dS in place
      // dP = dY V^T; dS = P * (dP - rowsum(dP * P)) (the softmax's backward).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, tk, head_dim, 1.0f, gy, dim, v + kv_at, kv_stride, 0.0f,
                  ds, tk);
      for (int64_t t = 0; t < tq; ++t) {
        double dot = 0.0;
        for (int64_t j = 0; j < tk; ++j) dot += static_cast<double>(ds[t * tk + j]) * p[t * tk + j];
        const float d = static_cast<float>(dot);
        for (int64_t j = 0; j < tk; ++j) ds[t * tk + j] = p[t * tk + j] * (ds[t * tk + j] - d);
      }
      // dQ = scale * dS K, dK = scale * dS^T Q, dV = P^T dY: in this order (ops_attention.h).
      if (dq != nullptr)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, head_dim, tk, scale, ds, tk, k + kv_at, kv_stride,
                    beta_of(accumulate_q), dq + q_at, q_stride);
      if (dk != nullptr)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, tk, head_dim, tq, scale, ds, tk, q + q_at, q_stride,
                    beta_of(accumulate_k), dk + kv_at, kv_stride);
      if (dv != nullptr)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, tk, head_dim, tq, 1.0f, p, tk, gy, dim,
                    beta_of(accumulate_v), dv + kv_at, kv_stride);
    }
}

}  // namespace mplan::rt::cpu
