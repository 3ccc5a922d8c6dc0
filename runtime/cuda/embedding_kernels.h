#pragma once
// The CUDA backend's kernels of the vision transformer's embeddings
// (runtime/ops_embeddings.h), in embeddings.cu, named and computing as
// runtime/cpu/embedding_kernels.h; the patch embedding's GEMMs are cuBLAS calls
// in runtime/cuda/ops_embeddings.cpp, between unfold_patches and fold_patches.
//
// Host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

void class_token_forward(const float* x, const float* token, float* y, int64_t n, int64_t tokens, int64_t dim,
                         cudaStream_t stream);
void class_token_backward_data(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim, bool accumulate,
                               cudaStream_t stream);
void class_token_backward_param(const float* dy, float* dtoken, int64_t n, int64_t tokens, int64_t dim,
                                cudaStream_t stream);
void pos_embed_forward(const float* x, const float* p, float* y, int64_t n, int64_t count, cudaStream_t stream);
// The patches of x (n, c, height, width) as rows (n*tokens, c*patch*patch);
// fold: dx from the rows (zero, or kept when accumulating, outside the patches).
void unfold_patches(const float* x, float* rows, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                    cudaStream_t stream);
void fold_patches(const float* rows, float* dx, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                  bool accumulate, cudaStream_t stream);

}  // namespace mplan::rt::cuda
