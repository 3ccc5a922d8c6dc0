// The CUDA backend of runtime/ops_vision.h: the backend's own kernels
// (vision_kernels.h) for the element-wise, channel and normalisation ops,
// cuBLAS for the GEMMs of matmul, attention and patch embedding. Every op
// enqueues on its context's stream and returns.
//
// cuBLAS is column-major: a row-major (m x n) matrix is its column-major
// transpose, so row-major C = A B is computed as C^T = B^T A^T, each
// operand's leading dimension being its row stride. Attention runs one
// strided-batched GEMM per sample over the heads (a head's columns are
// head_dim floats apart within a row; samples are whole sequences apart),
// the row softmax over all heads at once.

#include <climits>

#include "runtime/check.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/vision_kernels.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

using cuda::Activation;
using cuda::Launch;

const float kOne = 1.0f, kZero = 0.0f;
const float* beta_of(bool accumulate) { return accumulate ? &kOne : &kZero; }

int to_int(int64_t value, const char* what) {
  MPLAN_RT_CHECK(value >= 0 && value <= INT_MAX, what);
  return static_cast<int>(value);
}

void activation(const Context& ctx, Activation f, const float* x, float* y, int64_t count, float low = 0,
                float high = 0) {
  Launch L(ctx);
  cuda::activation_forward(f, x, y, count, low, high, L.stream());
}
void activation_grad(const Context& ctx, Activation f, const float* in, const float* dy, float* dx, int64_t count,
                     bool accumulate, float low = 0, float high = 0) {
  Launch L(ctx);
  cuda::activation_backward(f, in, dy, dx, count, low, high, accumulate, L.stream());
}

}  // namespace

// ---- activations --------------------------------------------------------------------------------

void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::hardswish, x, y, count);
}
void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  activation_grad(ctx, Activation::hardswish, x, dy, dx, count, accumulate);
}
void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::hardsigmoid, x, y, count);
}
void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate) {
  activation_grad(ctx, Activation::hardsigmoid, x, dy, dx, count, accumulate);
}
void silu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::silu, x, y, count);
}
void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  activation_grad(ctx, Activation::silu, x, dy, dx, count, accumulate);
}
void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::sigmoid, x, y, count);
}
void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  activation_grad(ctx, Activation::sigmoid, y, dy, dx, count, accumulate);
}
void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation) {
  activation(ctx, tanh_approximation ? Activation::gelu_tanh : Activation::gelu, x, y, count);
}
void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate) {
  activation_grad(ctx, tanh_approximation ? Activation::gelu_tanh : Activation::gelu, x, dy, dx, count, accumulate);
}
void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max) {
  activation(ctx, Activation::clip, x, y, count, min, max);
}
void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min, float max,
                   bool accumulate) {
  activation_grad(ctx, Activation::clip, y, dy, dx, count, accumulate, min, max);
}

// ---- channel ops ----------------------------------------------------------------------------------

void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample) {
  Launch L(ctx);
  cuda::channel_mul_forward(x, s, y, n, c, inner, s_per_sample, L.stream());
}
void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  Launch L(ctx);
  cuda::channel_mul_backward_x(s, dy, dx, n, c, inner, s_per_sample, accumulate, L.stream());
}
void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  Launch L(ctx);
  cuda::channel_mul_backward_s(x, dy, ds, n, c, inner, s_per_sample, accumulate, L.stream());
}
void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w) {
  Launch L(ctx);
  cuda::adaptive_avg_pool_forward(x, y, planes, h, w, out_h, out_w, L.stream());
}
void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, bool accumulate) {
  Launch L(ctx);
  cuda::adaptive_avg_pool_backward(dy, dx, planes, h, w, out_h, out_w, accumulate, L.stream());
}
void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner,
                     int64_t groups, bool accumulate) {
  Launch L(ctx);
  cuda::channel_shuffle(x, y, n, c, inner, groups, accumulate, L.stream());
}
void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols) {
  Launch L(ctx);
  cuda::slice_forward(x, y, outer, x_cols, offset, y_cols, L.stream());
}
void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate) {
  Launch L(ctx);
  cuda::slice_backward(dy, dx, outer, x_cols, offset, y_cols, accumulate, L.stream());
}

// ---- layer normalisation -----------------------------------------------------------------------

void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* invstd, int64_t outer, int64_t c, int64_t inner, float eps) {
  Launch L(ctx);
  cuda::layernorm_forward(x, gamma, beta, y, mean, invstd, outer, c, inner, eps, L.stream());
}
void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate) {
  Launch L(ctx);
  cuda::layernorm_backward_data(x, gamma, mean, invstd, dy, dx, outer, c, inner, accumulate, L.stream());
}
void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  Launch L(ctx);
  cuda::layernorm_backward_params(x, mean, invstd, dy, dgamma, dbeta, outer, c, inner, L.stream());
}

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

// ---- embeddings ---------------------------------------------------------------------------------

void patch_embed_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y,
                         float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                         int64_t out) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  if (rows == 0) return;
  Launch L(ctx);
  cuda::unfold_patches(x, workspace, n, c, height, width, patch, L.stream());
  if (bias != nullptr) cuda::broadcast_rows(bias, y, rows, out, L.stream());
  // y^T (out x rows) = w (out x row) patches^T (row x rows), as linear_forward.
  const int rows_ = to_int(rows, "patch_embed: rows"), row_ = to_int(row, "patch_embed: row"),
            out_ = to_int(out, "patch_embed: out");
  MPLAN_CUBLAS_CHECK(cublasSgemm(L.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, rows_, row_, &kOne, w, row_, workspace,
                                 row_, bias != nullptr ? &kOne : &kZero, y, out_));
}
void patch_embed_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, float* workspace,
                               int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out,
                               bool accumulate) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  Launch L(ctx);
  if (rows > 0) {
    const int rows_ = to_int(rows, "patch_embed: rows"), row_ = to_int(row, "patch_embed: row"),
              out_ = to_int(out, "patch_embed: out");
    // dpatches^T (row x rows) = w^T (row x out) dy^T (out x rows), as linear_backward_data.
    MPLAN_CUBLAS_CHECK(cublasSgemm(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, row_, rows_, out_, &kOne, w, row_, dy, out_,
                                   &kZero, workspace, row_));
  }
  cuda::fold_patches(workspace, dx, n, c, height, width, patch, accumulate, L.stream());
}
void patch_embed_backward_params(const Context& ctx, const float* x, const float* dy, float* dw, float* dbias,
                                 float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                                 int64_t out) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  if (rows == 0) return;
  Launch L(ctx);
  cuda::unfold_patches(x, workspace, n, c, height, width, patch, L.stream());
  const int rows_ = to_int(rows, "patch_embed: rows"), row_ = to_int(row, "patch_embed: row"),
            out_ = to_int(out, "patch_embed: out");
  // dw^T (row x out) += patches^T (row x rows) dy (rows x out), as linear_backward_weights.
  MPLAN_CUBLAS_CHECK(cublasSgemm(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, row_, out_, rows_, &kOne, workspace, row_, dy,
                                 out_, &kOne, dw, row_));
  if (dbias != nullptr) cuda::sum_rows_into(dy, dbias, rows, out, L.stream());
}
void class_token_forward(const Context& ctx, const float* x, const float* token, float* y, int64_t n, int64_t tokens,
                         int64_t dim) {
  Launch L(ctx);
  cuda::class_token_forward(x, token, y, n, tokens, dim, L.stream());
}
void class_token_backward_data(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim,
                               bool accumulate) {
  Launch L(ctx);
  cuda::class_token_backward_data(dy, dx, n, tokens, dim, accumulate, L.stream());
}
void class_token_backward_param(const Context& ctx, const float* dy, float* dtoken, int64_t n, int64_t tokens,
                                int64_t dim) {
  Launch L(ctx);
  cuda::class_token_backward_param(dy, dtoken, n, tokens, dim, L.stream());
}
void pos_embed_forward(const Context& ctx, const float* x, const float* p, float* y, int64_t n, int64_t count) {
  Launch L(ctx);
  cuda::pos_embed_forward(x, p, y, n, count, L.stream());
}
void pos_embed_backward_param(const Context& ctx, const float* dy, float* dp, int64_t n, int64_t count) {
  Launch L(ctx);
  cuda::sum_rows_into(dy, dp, n, count, L.stream());  // dp[i] += sum over the n samples
}

}  // namespace mplan::rt
