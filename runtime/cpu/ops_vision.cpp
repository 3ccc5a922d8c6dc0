// The CPU backend of runtime/ops_vision.h: each op captures its arguments by
// value and runs its kernel (runtime/cpu/vision_kernels.h) when the stream
// reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/stream.h"
#include "runtime/cpu/vision_kernels.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::hardswish_forward(x, y, count); });
}

void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  launch(ctx, [=] { cpu::hardswish_backward(x, dy, dx, count, accumulate); });
}

void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::hardsigmoid_forward(x, y, count); });
}

void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate) {
  launch(ctx, [=] { cpu::hardsigmoid_backward(x, dy, dx, count, accumulate); });
}

void silu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::silu_forward(x, y, count); });
}

void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::silu_backward(x, dy, dx, count, accumulate); });
}

void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::sigmoid_forward(x, y, count); });
}

void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::sigmoid_backward(y, dy, dx, count, accumulate); });
}

void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation) {
  launch(ctx, [=] { cpu::gelu_forward(x, y, count, tanh_approximation); });
}

void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate) {
  launch(ctx, [=] { cpu::gelu_backward(x, dy, dx, count, tanh_approximation, accumulate); });
}

void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max) {
  launch(ctx, [=] { cpu::clip_forward(x, y, count, min, max); });
}

void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min, float max,
                   bool accumulate) {
  launch(ctx, [=] { cpu::clip_backward(y, dy, dx, count, min, max, accumulate); });
}

void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample) {
  launch(ctx, [=] { cpu::channel_mul_forward(x, s, y, n, c, inner, s_per_sample); });
}

void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  launch(ctx, [=] { cpu::channel_mul_backward_x(s, dy, dx, n, c, inner, s_per_sample, accumulate); });
}

void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate) {
  launch(ctx, [=] { cpu::channel_mul_backward_s(x, dy, ds, n, c, inner, s_per_sample, accumulate); });
}

void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w) {
  launch(ctx, [=] { cpu::adaptive_avg_pool_forward(x, y, planes, h, w, out_h, out_w); });
}

void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, bool accumulate) {
  launch(ctx, [=] { cpu::adaptive_avg_pool_backward(dy, dx, planes, h, w, out_h, out_w, accumulate); });
}

void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                     bool accumulate) {
  launch(ctx, [=] { cpu::channel_shuffle(x, y, n, c, inner, groups, accumulate); });
}

void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols) {
  launch(ctx, [=] { cpu::slice_forward(x, y, outer, x_cols, offset, y_cols); });
}

void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate) {
  launch(ctx, [=] { cpu::slice_backward(dy, dx, outer, x_cols, offset, y_cols, accumulate); });
}

void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* invstd, int64_t outer, int64_t c, int64_t inner, float eps) {
  launch(ctx, [=] { cpu::layernorm_forward(x, gamma, beta, y, mean, invstd, outer, c, inner, eps); });
}

void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate) {
  launch(ctx, [=] { cpu::layernorm_backward_data(x, gamma, mean, invstd, dy, dx, outer, c, inner, accumulate); });
}

void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner) {
  launch(ctx, [=] { cpu::layernorm_backward_params(x, mean, invstd, dy, dgamma, dbeta, outer, c, inner); });
}

void matmul_forward(const Context& ctx, const float* a, const float* b, float* y, int64_t batch, int64_t m, int64_t k,
                    int64_t n, bool transpose_b) {
  launch(ctx, [=] { cpu::matmul_forward(a, b, y, batch, m, k, n, transpose_b); });
}

void matmul_backward_a(const Context& ctx, const float* b, const float* dy, float* da, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  launch(ctx, [=] { cpu::matmul_backward_a(b, dy, da, batch, m, k, n, transpose_b, accumulate); });
}

void matmul_backward_b(const Context& ctx, const float* a, const float* dy, float* db, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  launch(ctx, [=] { cpu::matmul_backward_b(a, dy, db, batch, m, k, n, transpose_b, accumulate); });
}

void softmax_forward(const Context& ctx, const float* x, float* y, int64_t rows, int64_t cols) {
  launch(ctx, [=] { cpu::softmax_forward(x, y, rows, cols); });
}

void softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      bool accumulate) {
  launch(ctx, [=] { cpu::softmax_backward(y, dy, dx, rows, cols, accumulate); });
}

void attention_forward(const Context& ctx, const float* q, const float* k, const float* v, float* probs, float* y,
                       int64_t n, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride,
                       int64_t kv_stride, float scale) {
  launch(ctx,
         [=] { cpu::attention_forward(q, k, v, probs, y, n, heads, tq, tk, head_dim, q_stride, kv_stride, scale); });
}

void attention_backward(const Context& ctx, const float* q, const float* k, const float* v, const float* probs,
                        const float* dy, float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads,
                        int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v) {
  launch(ctx, [=] {
    cpu::attention_backward(q, k, v, probs, dy, dq, dk, dv, scratch, n, heads, tq, tk, head_dim, q_stride, kv_stride,
                            scale, accumulate_q, accumulate_k, accumulate_v);
  });
}

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
