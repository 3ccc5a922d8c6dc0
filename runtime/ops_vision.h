#pragma once
// The kernels of the ops that today's vision models add to the model table
// (issue 14: MobileNet, EfficientNet, RegNet, ShuffleNet, ConvNeXt, ViT), part
// of the backend-neutral API of runtime/ops.h (which includes this file) and
// under its rules: the execution context first, explicit sizes, `accumulate`
// on every gradient an op writes (false writes, true adds), parameter
// gradients always accumulate (the update zeroes them). Each kernel's
// semantics are PyTorch's, named beside it; the CPU backend implements them
// in runtime/cpu/ (vision_kernels.h), the CUDA backend in runtime/cuda/
// (vision_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- activations, element-wise over `count` floats ------------------------------------
// Backward reads the input x, or the output y where that determines PyTorch's
// derivative exactly (sigmoid, clip).

// F.hardswish: x * relu6(x + 3) / 6.
void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count);
// PyTorch's hardswish_backward: 0 below -3, dy * (x / 3 + 0.5) up to 3, dy above.
void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate);
// F.hardsigmoid: relu6(x + 3) / 6.
void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy / 6 where -3 < x < 3 (PyTorch's rule), else 0.
void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate);
// F.silu (swish): x * sigmoid(x).
void silu_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy * s * (1 + x * (1 - s)), s = sigmoid(x).
void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool accumulate);
// torch.sigmoid.
void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dy * y * (1 - y).
void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count,
                      bool accumulate);
// F.gelu: x * Phi(x) with the erf form, or approximate='tanh':
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation);
void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate);
// torch.clamp / F.hardtanh (ReLU6 is min 0, max 6).
void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max);
// dy where min < y < max, else 0 (hardtanh_backward's rule, exact from y).
void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min,
                   float max, bool accumulate);

// ---- per-channel multiply ----------------------------------------------------------------
// x (n, c, inner) times one factor per channel: s (n, c) when s_per_sample
// (squeeze-and-excitation's x * scale, or an element-wise product with
// c = elements, inner = 1), s (c) shared by every sample otherwise (a
// learned per-channel scale, ConvNeXt's layer scale).
void channel_mul_forward(const Context& ctx, const float* x, const float* s, float* y, int64_t n, int64_t c,
                         int64_t inner, bool s_per_sample);
// dx = dy * s.
void channel_mul_backward_x(const Context& ctx, const float* s, const float* dy, float* dx, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate);
// ds = sum over inner (and over the samples when s is shared) of dy * x.
void channel_mul_backward_s(const Context& ctx, const float* x, const float* dy, float* ds, int64_t n, int64_t c,
                            int64_t inner, bool s_per_sample, bool accumulate);

// ---- adaptive average pooling (F.adaptive_avg_pool2d) ----------------------------------
// planes = n * c images of h x w to out_h x out_w; output cell i averages input
// rows floor(i*h/out_h) .. ceil((i+1)*h/out_h) - 1, columns alike.
void adaptive_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                               int64_t out_h, int64_t out_w);
void adaptive_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t planes, int64_t h,
                                int64_t w, int64_t out_h, int64_t out_w, bool accumulate);

// ---- channel shuffle (ShuffleNet's view / transpose / view) -----------------------------
// y[b, j*groups + i] = x[b, i*(c/groups) + j] for planes of `inner` floats. Its
// backward is the shuffle with c/groups groups.
void channel_shuffle(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t inner,
                     int64_t groups, bool accumulate);

// ---- slice of one axis (torch.chunk / narrow) ---------------------------------------------
// y (outer, y_cols) = x[:, offset : offset + y_cols] of x (outer, x_cols).
void slice_forward(const Context& ctx, const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset,
                   int64_t y_cols);
// dx[:, offset : offset + y_cols] = dy; written: zero elsewhere; accumulated:
// added there only.
void slice_backward(const Context& ctx, const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset,
                    int64_t y_cols, bool accumulate);

// ---- layer normalisation over one axis (F.layer_norm) ------------------------------------
// x (outer, c, inner) normalised over c at every (outer, inner) position: over
// channels of [C, H, W] (ConvNeXt's LayerNorm2d: inner = H*W) or over the
// features of [T, D] (inner = 1). mean and invstd = 1/sqrt(biased var + eps)
// have one value per position, saved for the backward.
void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* invstd, int64_t outer, int64_t c, int64_t inner, float eps);
void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate);
// dgamma += sum(dy * x_hat), dbeta += sum(dy) over the positions.
void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner);

// ---- matrix multiply and softmax -----------------------------------------------------------
// y (batch, m, n) = a (batch, m, k) @ b, b (batch, k, n), or b^T of b (batch,
// n, k) when transpose_b (torch.matmul of batched operands).
void matmul_forward(const Context& ctx, const float* a, const float* b, float* y, int64_t batch, int64_t m,
                    int64_t k, int64_t n, bool transpose_b);
// da = dy @ b^T (or dy @ b when transpose_b).
void matmul_backward_a(const Context& ctx, const float* b, const float* dy, float* da, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate);
// db = a^T @ dy (or dy^T @ a when transpose_b).
void matmul_backward_b(const Context& ctx, const float* a, const float* dy, float* db, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate);
// y (rows, cols) = softmax over each row (the last axis).
void softmax_forward(const Context& ctx, const float* x, float* y, int64_t rows, int64_t cols);
// dx = y * (dy - sum(dy * y)) per row.
void softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      bool accumulate);

// ---- scaled dot-product attention, multi-head -----------------------------------------
// For each of n samples and each head h: P = softmax(Q_h K_h^T * scale)
// (tq x tk), Y_h = P V_h; Q_h is columns h*head_dim .. of q, whose rows (one
// per query token) are q_stride floats apart, k and v likewise with kv_stride
// (a packed in-projection [q | k | v] has q = qkv, k = qkv + D, v = qkv + 2D,
// strides 3D). y (n, tq, heads*head_dim); probs (n, heads, tq, tk) is saved
// for the backward: the attention matrix, the memory this op is about.
void attention_forward(const Context& ctx, const float* q, const float* k, const float* v, float* probs, float* y,
                       int64_t n, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride,
                       int64_t kv_stride, float scale);
// dq, dk, dv (null: not wanted) in the layouts of q, k and v, each written or
// added by its own flag, in the order dq, dk, dv per head (so aliasing ones,
// a packed gradient, combine correctly). scratch: n*heads*tq*tk floats.
void attention_backward(const Context& ctx, const float* q, const float* k, const float* v, const float* probs,
                        const float* dy, float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads,
                        int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v);

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
