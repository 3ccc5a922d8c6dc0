#pragma once
// The CPU kernels of the vision-model ops (runtime/ops_vision.h says what each
// computes): plain synchronous functions with the API's arguments less the
// context; runtime/cpu/ops_vision.cpp runs them on the CPU streams. Sums over
// many terms accumulate in double, as the other CPU kernels do.

#include <cstdint>

#include "runtime/types.h"

namespace mplan::rt::cpu {

// ---- activations (activations.cpp) --------------------------------------------------------

void hardswish_forward(const float* x, float* y, int64_t count);
void hardswish_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void hardsigmoid_forward(const float* x, float* y, int64_t count);
void hardsigmoid_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void silu_forward(const float* x, float* y, int64_t count);
void silu_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void sigmoid_forward(const float* x, float* y, int64_t count);
void sigmoid_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate);
void gelu_forward(const float* x, float* y, int64_t count, bool tanh_approximation);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t count, bool tanh_approximation,
                   bool accumulate);
void clip_forward(const float* x, float* y, int64_t count, float min, float max);
void clip_backward(const float* y, const float* dy, float* dx, int64_t count, float min, float max, bool accumulate);

// ---- channel ops (channel_ops.cpp) ------------------------------------------------------------

void channel_mul_forward(const float* x, const float* s, float* y, int64_t n, int64_t c, int64_t inner,
                         bool s_per_sample);
void channel_mul_backward_x(const float* s, const float* dy, float* dx, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate);
void channel_mul_backward_s(const float* x, const float* dy, float* ds, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate);
void adaptive_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                               int64_t out_w);
void adaptive_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool accumulate);
void channel_shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                     bool accumulate);
void slice_forward(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols);
void slice_backward(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                    bool accumulate);

// ---- layer normalisation (layernorm.cpp) ---------------------------------------------------

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps);
void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate);
void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner);

// ---- matmul, softmax, attention (attention.cpp) ----------------------------------------------

void matmul_forward(const float* a, const float* b, float* y, int64_t batch, int64_t m, int64_t k, int64_t n,
                    bool transpose_b);
void matmul_backward_a(const float* b, const float* dy, float* da, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate);
void matmul_backward_b(const float* a, const float* dy, float* db, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate);
void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate);
void attention_forward(const float* q, const float* k, const float* v, float* probs, float* y, int64_t n,
                       int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride,
                       float scale);
void attention_backward(const float* q, const float* k, const float* v, const float* probs, const float* dy,
                        float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads, int64_t tq,
                        int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v);

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

// ---- convolutions the general algorithms do not take (conv_general.cpp) ------------------------
// Dilated convolutions (any groups) and depthwise ones (groups = c, one input
// channel per group): a direct loop nest per output plane, no workspace. The
// dispatcher (conv.cpp) routes such shapes here whatever the planned
// algorithm, and reports only "direct" as supported for them.
bool conv_takes_general_path(const ConvShape& shape);
void conv_forward_general(const ConvShape& shape, const float* x, const float* w, float* y, bool accumulate);
void conv_backward_data_general(const ConvShape& shape, const float* w, const float* dy, float* dx, bool accumulate);
void conv_backward_filter_general(const ConvShape& shape, const float* x, const float* dy, float* dw,
                                  bool accumulate);

}  // namespace mplan::rt::cpu
