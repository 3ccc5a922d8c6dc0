// The vision transformer's embedding kernels (embedding_kernels.h), as
// runtime/cpu/embeddings.cpp: the class token, the position embedding, and
// the unfolding and folding of patches around the patch embedding's GEMMs.

#include "runtime/cuda/check.h"
#include "runtime/cuda/embedding_kernels.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

__global__ void class_token_forward_kernel(const float* x, const float* token, float* y, int64_t n, int64_t tokens,
                                           int64_t dim) {
  const int64_t sample = (tokens + 1) * dim;
  MPLAN_FOR_EACH(i, n * sample) {
    const int64_t b = i / sample, r = i % sample;
    y[i] = r < dim ? token[r] : x[b * tokens * dim + r - dim];
  }
}

__global__ void class_token_backward_data_kernel(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim,
                                                 bool accumulate) {
  const int64_t sample = tokens * dim;
  MPLAN_FOR_EACH(i, n * sample) store(dx, i, dy[(i / sample) * (sample + dim) + dim + i % sample], accumulate);
}

__global__ void class_token_backward_param_kernel(const float* dy, float* dtoken, int64_t n, int64_t tokens,
                                                  int64_t dim) {
  MPLAN_FOR_EACH(d, dim) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b) sum += dy[b * (tokens + 1) * dim + d];
    dtoken[d] = static_cast<float>(dtoken[d] + sum);
  }
}

__global__ void pos_embed_forward_kernel(const float* x, const float* p, float* y, int64_t n, int64_t count) {
  MPLAN_FOR_EACH(i, n * count) y[i] = x[i] + p[i % count];
}

// Row (b, patch), column (channel, i, j) of the patches.
__device__ __forceinline__ int64_t patch_source(int64_t row, int64_t col, int64_t c, int64_t height, int64_t width,
                                                int64_t patch) {
  const int64_t grid_w = width / patch, tokens = (height / patch) * grid_w;
  const int64_t b = row / tokens, t = row % tokens, ph = t / grid_w, pw = t % grid_w;
  const int64_t ch = col / (patch * patch), i = (col / patch) % patch, j = col % patch;
  return ((b * c + ch) * height + ph * patch + i) * width + pw * patch + j;
}

__global__ void unfold_patches_kernel(const float* x, float* rows, int64_t n, int64_t c, int64_t height,
                                      int64_t width, int64_t patch) {
  const int64_t row = c * patch * patch, count = n * (height / patch) * (width / patch) * row;
  MPLAN_FOR_EACH(i, count) rows[i] = x[patch_source(i / row, i % row, c, height, width, patch)];
}

// One thread per element of dx: inside the patch grid it takes its patch's
// value (patches do not overlap), outside it gets none.
__global__ void fold_patches_kernel(const float* rows, float* dx, int64_t n, int64_t c, int64_t height, int64_t width,
                                    int64_t patch, bool accumulate) {
  const int64_t grid_h = height / patch, grid_w = width / patch, row = c * patch * patch;
  MPLAN_FOR_EACH(at, n * c * height * width) {
    const int64_t q = at % width, r = (at / width) % height, ch = (at / (width * height)) % c,
                  b = at / (width * height * c);
    float g = 0.0f;
    if (r < grid_h * patch && q < grid_w * patch) {
      const int64_t token = (r / patch) * grid_w + q / patch;
      g = rows[(b * grid_h * grid_w + token) * row + (ch * patch + r % patch) * patch + q % patch];
    }
    store(dx, at, g, accumulate);
  }
}

}  // namespace

void class_token_forward(const float* x, const float* token, float* y, int64_t n, int64_t tokens, int64_t dim,
                         cudaStream_t stream) {
  MPLAN_LAUNCH(class_token_forward_kernel, n * (tokens + 1) * dim, x, token, y, n, tokens, dim);
}
void class_token_backward_data(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim, bool accumulate,
                               cudaStream_t stream) {
  MPLAN_LAUNCH(class_token_backward_data_kernel, n * tokens * dim, dy, dx, n, tokens, dim, accumulate);
}
void class_token_backward_param(const float* dy, float* dtoken, int64_t n, int64_t tokens, int64_t dim,
                                cudaStream_t stream) {
  MPLAN_LAUNCH(class_token_backward_param_kernel, dim, dy, dtoken, n, tokens, dim);
}
void pos_embed_forward(const float* x, const float* p, float* y, int64_t n, int64_t count, cudaStream_t stream) {
  MPLAN_LAUNCH(pos_embed_forward_kernel, n * count, x, p, y, n, count);
}
void unfold_patches(const float* x, float* rows, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                    cudaStream_t stream) {
  MPLAN_LAUNCH(unfold_patches_kernel, n * (height / patch) * (width / patch) * c * patch * patch, x, rows, n, c,
               height, width, patch);
}
void fold_patches(const float* rows, float* dx, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                  bool accumulate, cudaStream_t stream) {
  MPLAN_LAUNCH(fold_patches_kernel, n * c * height * width, rows, dx, n, c, height, width, patch, accumulate);
}

}  // namespace mplan::rt::cuda
