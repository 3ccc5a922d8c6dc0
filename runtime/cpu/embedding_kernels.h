#pragma once
// The CPU kernels of runtime/ops_embeddings.h (which says what each computes),
// in embeddings.cpp: plain synchronous functions with the API's arguments less
// the context; runtime/cpu/ops_embeddings.cpp runs them on the CPU streams.
// Sums over many terms accumulate in double, as the other CPU kernels do.

#include <cstdint>

namespace mplan::rt::cpu {

// ---- transformer embeddings (embeddings.cpp) ------------------------------------------------

void patch_embed_forward(const float* x, const float* w, const float* bias, float* y, float* workspace, int64_t n,
                         int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out);
void patch_embed_backward_data(const float* w, const float* dy, float* dx, float* workspace, int64_t n, int64_t c,
                               int64_t height, int64_t width, int64_t patch, int64_t out, bool accumulate);
void patch_embed_backward_params(const float* x, const float* dy, float* dw, float* dbias, float* workspace,
                                 int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out);
void class_token_forward(const float* x, const float* token, float* y, int64_t n, int64_t tokens, int64_t dim);
void class_token_backward_data(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim, bool accumulate);
void class_token_backward_param(const float* dy, float* dtoken, int64_t n, int64_t tokens, int64_t dim);
void pos_embed_forward(const float* x, const float* p, float* y, int64_t n, int64_t count);
void pos_embed_backward_param(const float* dy, float* dp, int64_t n, int64_t count);

}  // namespace mplan::rt::cpu
