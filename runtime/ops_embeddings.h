#pragma once
// The vision transformer's embeddings in the runtime's op API: the patch
// embedding, the class token and the position embedding (ViT).
//
// Part of the backend-neutral API of runtime/ops.h (which includes this
// file) and under its rules: the execution context first, explicit sizes,
// `accumulate` on every gradient an op writes (false writes, true adds),
// parameter gradients always accumulate (the update zeroes them). Each
// kernel's semantics are PyTorch's, named beside it.
//
// CPU: runtime/cpu/embeddings.cpp (embedding_kernels.h). CUDA:
// runtime/cuda/embeddings.cu (embedding_kernels.h) and cuBLAS for the patch
// embedding's GEMMs (runtime/cuda/ops_embeddings.cpp).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- vision transformer embeddings -------------------------------------------------------
// Patch embedding: a conv with kernel = stride = patch and no padding, its
// output laid out as a sequence (ViT's conv_proj, reshape, permute): y (n,
// tokens, out), tokens = (height/patch)*(width/patch) in row-major patch order;
// w (out, c, patch, patch), bias (out) or null. workspace: the unfolded
// patches, n*tokens*c*patch*patch floats.
void patch_embed_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y,
                         float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                         int64_t out);
void patch_embed_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, float* workspace,
                               int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out,
                               bool accumulate);
// dw += dy^T @ patches, dbias (or null) += the column sums of dy.
void patch_embed_backward_params(const Context& ctx, const float* x, const float* dy, float* dw, float* dbias,
                                 float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                                 int64_t out);
// y (n, tokens + 1, dim) = [token; x] for each sample (ViT's class token).
void class_token_forward(const Context& ctx, const float* x, const float* token, float* y, int64_t n, int64_t tokens,
                         int64_t dim);
// dx = dy[:, 1:, :].
void class_token_backward_data(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t tokens,
                               int64_t dim, bool accumulate);
// dtoken += sum over samples of dy[:, 0, :].
void class_token_backward_param(const Context& ctx, const float* dy, float* dtoken, int64_t n, int64_t tokens,
                                int64_t dim);
// y = x + p, p (count) added to each of the n samples (a position embedding).
void pos_embed_forward(const Context& ctx, const float* x, const float* p, float* y, int64_t n, int64_t count);
// dp += sum over samples of dy.
void pos_embed_backward_param(const Context& ctx, const float* dy, float* dp, int64_t n, int64_t count);

}  // namespace mplan::rt
