// The CUDA backend of runtime/ops_embeddings.h: the backend's own kernels
// (embedding_kernels.h) and, for the patch embedding, one cuBLAS GEMM over
// the unfolded patches, as linear_forward and its gradients (column-major:
// see ops_attention.cpp). Every op enqueues on its context's stream and
// returns.

#include "runtime/cuda/check.h"
#include "runtime/cuda/cublas_args.h"
#include "runtime/cuda/embedding_kernels.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cuda::kOne;
using cuda::kZero;
using cuda::Launch;
using cuda::to_int;

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
