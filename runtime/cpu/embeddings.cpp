// The vision transformer's embeddings: patch embedding (a convolution whose
// kernel equals its stride, as one GEMM over the unfolded patches), the class
// token, and the position embedding.

#include <cblas.h>

#include <cstring>
#include <vector>

#include "runtime/cpu/embedding_kernels.h"

namespace mplan::rt::cpu {
namespace {

// The patches of x (n, c, height, width) as rows of workspace (n*tokens, c*patch*patch),
// or (fold) the rows added back into x. Patches do not overlap.
void unfold_patches(const float* x, float* rows, int64_t n, int64_t c, int64_t height, int64_t width,
                    int64_t patch) {
  const int64_t grid_h = height / patch, grid_w = width / patch, row = c * patch * patch;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ph = 0; ph < grid_h; ++ph)
      for (int64_t pw = 0; pw < grid_w; ++pw) {
        float* out = rows + ((b * grid_h + ph) * grid_w + pw) * row;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < patch; ++i)
            std::memcpy(out + (ch * patch + i) * patch,
                        x + ((b * c + ch) * height + ph * patch + i) * width + pw * patch, sizeof(float) * patch);
      }
}

void fold_patches(const float* rows, float* x, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                  bool accumulate) {
  // Rows and columns past the last whole patch get no gradient (the
  // convolution never reads them).
  if (!accumulate) std::memset(x, 0, sizeof(float) * n * c * height * width);
  const int64_t grid_h = height / patch, grid_w = width / patch, row = c * patch * patch;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ph = 0; ph < grid_h; ++ph)
      for (int64_t pw = 0; pw < grid_w; ++pw) {
        const float* in = rows + ((b * grid_h + ph) * grid_w + pw) * row;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < patch; ++i) {
            float* dst = x + ((b * c + ch) * height + ph * patch + i) * width + pw * patch;
            const float* src = in + (ch * patch + i) * patch;
            for (int64_t j = 0; j < patch; ++j) dst[j] += src[j];
          }
      }
}

}  // namespace

void patch_embed_forward(const float* x, const float* w, const float* bias, float* y, float* workspace, int64_t n,
                         int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  unfold_patches(x, workspace, n, c, height, width, patch);
  if (bias != nullptr)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * out, bias, sizeof(float) * out);
  // y (rows, out) = patches (rows, row) @ w^T (row, out) [+ y]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, row, 1.0f, workspace, row, w, row,
              bias != nullptr ? 1.0f : 0.0f, y, out);
}

void patch_embed_backward_data(const float* w, const float* dy, float* dx, float* workspace, int64_t n, int64_t c,
                               int64_t height, int64_t width, int64_t patch, int64_t out, bool accumulate) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  // dpatches (rows, row) = dy (rows, out) @ w (out, row)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, row, out, 1.0f, dy, out, w, row, 0.0f, workspace, row);
  fold_patches(workspace, dx, n, c, height, width, patch, accumulate);
}

void patch_embed_backward_params(const float* x, const float* dy, float* dw, float* dbias, float* workspace,
                                 int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out) {
  const int64_t rows = n * (height / patch) * (width / patch), row = c * patch * patch;
  unfold_patches(x, workspace, n, c, height, width, patch);
  // dw (out, row) += dy^T (out, rows) @ patches (rows, row)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, row, rows, 1.0f, dy, out, workspace, row, 1.0f, dw, row);
  if (dbias == nullptr) return;
  for (int64_t o = 0; o < out; ++o) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * out + o];
    dbias[o] = static_cast<float>(dbias[o] + sum);
  }
}

void class_token_forward(const float* x, const float* token, float* y, int64_t n, int64_t tokens, int64_t dim) {
  for (int64_t b = 0; b < n; ++b) {
    float* yb = y + b * (tokens + 1) * dim;
    std::memcpy(yb, token, sizeof(float) * dim);
    std::memcpy(yb + dim, x + b * tokens * dim, sizeof(float) * tokens * dim);
  }
}

void class_token_backward_data(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim, bool accumulate) {
  for (int64_t b = 0; b < n; ++b) {
    const float* g = dy + b * (tokens + 1) * dim + dim;
    float* out = dx + b * tokens * dim;
    if (accumulate) {
      for (int64_t i = 0; i < tokens * dim; ++i) out[i] += g[i];
    } else {
      std::memcpy(out, g, sizeof(float) * tokens * dim);
    }
  }
}

void class_token_backward_param(const float* dy, float* dtoken, int64_t n, int64_t tokens, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b) sum += dy[b * (tokens + 1) * dim + d];
    dtoken[d] = static_cast<float>(dtoken[d] + sum);
  }
}

void pos_embed_forward(const float* x, const float* p, float* y, int64_t n, int64_t count) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < count; ++i) y[b * count + i] = x[b * count + i] + p[i];
}

void pos_embed_backward_param(const float* dy, float* dp, int64_t n, int64_t count) {
  std::vector<double> sum(dp, dp + count);  // sample by sample, streaming dy
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < count; ++i) sum[i] += dy[b * count + i];
  for (int64_t i = 0; i < count; ++i) dp[i] = static_cast<float>(sum[i]);
}

}  // namespace mplan::rt::cpu
