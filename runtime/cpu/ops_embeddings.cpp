// The CPU backend of runtime/ops_embeddings.h: each op captures its arguments
// by value and runs its kernel (runtime/cpu/embedding_kernels.h) when the
// stream reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/embedding_kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void patch_embed_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y,
                         float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                         int64_t out) {
  launch(ctx, [=] { cpu::patch_embed_forward(x, w, bias, y, workspace, n, c, height, width, patch, out); });
}

void patch_embed_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, float* workspace,
                               int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch, int64_t out,
                               bool accumulate) {
  launch(ctx,
         [=] { cpu::patch_embed_backward_data(w, dy, dx, workspace, n, c, height, width, patch, out, accumulate); });
}

void patch_embed_backward_params(const Context& ctx, const float* x, const float* dy, float* dw, float* dbias,
                                 float* workspace, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                                 int64_t out) {
  launch(ctx, [=] { cpu::patch_embed_backward_params(x, dy, dw, dbias, workspace, n, c, height, width, patch, out); });
}

void class_token_forward(const Context& ctx, const float* x, const float* token, float* y, int64_t n, int64_t tokens,
                         int64_t dim) {
  launch(ctx, [=] { cpu::class_token_forward(x, token, y, n, tokens, dim); });
}

void class_token_backward_data(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim,
                               bool accumulate) {
  launch(ctx, [=] { cpu::class_token_backward_data(dy, dx, n, tokens, dim, accumulate); });
}

void class_token_backward_param(const Context& ctx, const float* dy, float* dtoken, int64_t n, int64_t tokens,
                                int64_t dim) {
  launch(ctx, [=] { cpu::class_token_backward_param(dy, dtoken, n, tokens, dim); });
}

void pos_embed_forward(const Context& ctx, const float* x, const float* p, float* y, int64_t n, int64_t count) {
  launch(ctx, [=] { cpu::pos_embed_forward(x, p, y, n, count); });
}

void pos_embed_backward_param(const Context& ctx, const float* dy, float* dp, int64_t n, int64_t count) {
  launch(ctx, [=] { cpu::pos_embed_backward_param(dy, dp, n, count); });
}

}  // namespace mplan::rt
