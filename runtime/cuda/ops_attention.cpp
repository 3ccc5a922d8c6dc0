// The CUDA backend of runtime/ops_attention.h: cuBLAS for the GEMMs of
// matmul and attention, the row softmax of normalization.cu. Every op
// enqueues on its context's stream and returns.
//
// cuBLAS is column-major: a row-major (m x n) matrix is its column-major
// transpose, so row-major C = A B is computed as C^T = B^T A^T, each
// operand's leading dimension being its row stride. Attention runs one
// strided-batched GEMM per sample over the heads (a head's columns are
// head_dim floats apart within a row; samples are whole sequences apart),
// the row softmax over all heads at once.

#include "runtime/cuda/check.h"
#include "runtime/cuda/cublas_args.h"
#include "runtime/cuda/normalization_kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cuda::beta_of;
using cuda::kOne;
using cuda::kZero;
using cuda::Launch;
using cuda::to_int;

// ---- matmul and softmax ---------------------------------------------------------------------------

void matmul_forward(const Context& ctx, const float* a, const float* b, float* y, int64_t batch, int64_t m,
                    int64_t k, int64_t n, bool transpose_b) {
  if (batch == 0 || m == 0 || n == 0) return;
  Launch L(ctx);
  const int m_ = to_int(m, "matmul: m"), k_ = to_int(k, "matmul: k"), n_ = to_int(n, "matmul: n");
  // y^T (n x m) = op(b^T) (n x k) a^T (k x m)
  MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n_,
                                               m_, k_, &kOne, b, transpose_b ? k_ : n_, k * n, a, k_, m * k, &kZero,
                                               y, n_, m * n, to_int(batch, "matmul: batch")));
}
void matmul_backward_a(const Context& ctx, const float* b, const float* dy, float* da, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  if (batch == 0 || m == 0 || k == 0) return;
  Launch L(ctx);
  const int m_ = to_int(m, "matmul: m"), k_ = to_int(k, "matmul: k"), n_ = to_int(n, "matmul: n");
  // da^T (k x m) = (b or b^T) (k x n) dy^T (n x m)
  MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), transpose_b ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, k_,
                                               m_, n_, &kOne, b, transpose_b ? k_ : n_, k * n, dy, n_, m * n,
                                               beta_of(accumulate), da, k_, m * k, to_int(batch, "matmul: batch")));
}
void matmul_backward_b(const Context& ctx, const float* a, const float* dy, float* db, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  if (batch == 0 || k == 0 || n == 0) return;
  Launch L(ctx);
  const int m_ = to_int(m, "matmul: m"), k_ = to_int(k, "matmul: k"), n_ = to_int(n, "matmul: n");
  const int batch_ = to_int(batch, "matmul: batch");
  if (transpose_b)  // db^T (k x n) = a^T (k x m) dy (m x n)
    MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k_, n_, m_, &kOne, a, k_, m * k,
                                                 dy, n_, m * n, beta_of(accumulate), db, k_, k * n, batch_));
  else  // db^T (n x k) = dy^T (n x m) a (m x k)
    MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, n_, k_, m_, &kOne, dy, n_,
                                                 m * n, a, k_, m * k, beta_of(accumulate), db, n_, k * n, batch_));
}
void softmax_forward(const Context& ctx, const float* x, float* y, int64_t rows, int64_t cols) {
  Launch L(ctx);
  cuda::softmax_rows(x, y, rows, cols, L.stream());
}
void softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      bool accumulate) {
  Launch L(ctx);
  cuda::softmax_rows_backward(y, dy, dx, rows, cols, accumulate, L.stream());
}

// ---- attention --------------------------------------------------------------------------------

void attention_forward(const Context& ctx, const float* q, const float* k, const float* v, float* probs, float* y,
                       int64_t n, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride,
                       int64_t kv_stride, float scale) {
  if (n == 0) return;
  Launch L(ctx);
  const int h_ = to_int(heads, "attention: heads"), tq_ = to_int(tq, "attention: tq"), tk_ = to_int(tk, "attention: tk");
  const int hd_ = to_int(head_dim, "attention: head_dim"), qs_ = to_int(q_stride, "attention: q stride");
  const int kvs_ = to_int(kv_stride, "attention: kv stride"), dim_ = to_int(heads * head_dim, "attention: features");
  for (int64_t b = 0; b < n; ++b) {
    const float* qb = q + b * tq * q_stride;
    const float* kb = k + b * tk * kv_stride;
    float* pb = probs + b * heads * tq * tk;
    // S^T (tk x tq) = scale * K_h (tk x hd) Q_h^T (hd x tq), per head.
    MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, tk_, tq_, hd_, &scale, kb, kvs_,
                                                 head_dim, qb, qs_, head_dim, &kZero, pb, tk_, tq * tk, h_));
  }
  cuda::softmax_rows(probs, probs, n * heads * tq, tk, L.stream());
  for (int64_t b = 0; b < n; ++b) {
    // Y_h^T (hd x tq) = V_h^T (hd x tk) P^T (tk x tq).
    MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, hd_, tq_, tk_, &kOne,
                                                 v + b * tk * kv_stride, kvs_, head_dim, probs + b * heads * tq * tk,
                                                 tk_, tq * tk, &kZero, y + b * tq * heads * head_dim, dim_, head_dim,
                                                 h_));
  }
}

void attention_backward(const Context& ctx, const float* q, const float* k, const float* v, const float* probs,
                        const float* dy, float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads,
                        int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v) {
  if (n == 0) return;
  Launch L(ctx);
  const int h_ = to_int(heads, "attention: heads"), tq_ = to_int(tq, "attention: tq"), tk_ = to_int(tk, "attention: tk");
  const int hd_ = to_int(head_dim, "attention: head_dim"), qs_ = to_int(q_stride, "attention: q stride");
  const int kvs_ = to_int(kv_stride, "attention: kv stride"), dim_ = to_int(heads * head_dim, "attention: features");
  const int64_t matrix = tq * tk, dim = heads * head_dim;
  for (int64_t b = 0; b < n; ++b)  // dP^T (tk x tq) = V_h (tk x hd) dY_h^T (hd x tq)
    MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, tk_, tq_, hd_, &kOne,
                                                 v + b * tk * kv_stride, kvs_, head_dim, dy + b * tq * dim, dim_,
                                                 head_dim, &kZero, scratch + b * heads * matrix, tk_, matrix, h_));
  cuda::softmax_rows_backward(probs, scratch, scratch, n * heads * tq, tk, /*accumulate=*/false, L.stream());
  for (int64_t b = 0; b < n; ++b) {
    const float* ds = scratch + b * heads * matrix;
    const float* qb = q + b * tq * q_stride;
    const float* kb = k + b * tk * kv_stride;
    if (dq != nullptr)  // dQ_h^T (hd x tq) = scale * K_h^T (hd x tk) dS^T (tk x tq)
      MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, hd_, tq_, tk_, &scale, kb,
                                                   kvs_, head_dim, ds, tk_, matrix, beta_of(accumulate_q),
                                                   dq + b * tq * q_stride, qs_, head_dim, h_));
    if (dk != nullptr)  // dK_h^T (hd x tk) = scale * Q_h^T (hd x tq) dS (tq x tk)
      MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, hd_, tk_, tq_, &scale, qb,
                                                   qs_, head_dim, ds, tk_, matrix, beta_of(accumulate_k),
                                                   dk + b * tk * kv_stride, kvs_, head_dim, h_));
    if (dv != nullptr)  // dV_h^T (hd x tk) = dY_h^T (hd x tq) P (tq x tk)
      MPLAN_CUBLAS_CHECK(cublasSgemmStridedBatched(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, hd_, tk_, tq_, &kOne,
                                                   dy + b * tq * dim, dim_, head_dim, probs + b * heads * matrix, tk_,
                                                   matrix, beta_of(accumulate_v), dv + b * tk * kv_stride, kvs_,
                                                   head_dim, h_));
  }
}

}  // namespace mplan::rt
