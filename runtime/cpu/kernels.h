#pragma once
// The ops of the CPU backend, forward and backward, for every layer of the model
// table (docs/model-format.md): NCHW float32, explicit pointers and sizes, in the
// style of llm.c. These are plain synchronous functions; the backend-neutral
// API (runtime/ops.h) runs them on the CPU streams (runtime/cpu/ops.cpp).
//
// Gradient accumulation (moDNN §III, sub-batches): every backward op takes an
// `accumulate` flag for each output gradient: false writes it (the first writer),
// true adds to it (later sub-batches, or a second consumer of the same tensor).
//
// Shapes: n is the number of samples in this call (the sub-batch), c channels,
// hw = h*w the spatial size. Convolution is in runtime/cpu/conv_kernels.h.

#include <cstddef>
#include <cstdint>

#include "runtime/cpu/conv_kernels.h"

namespace mplan::rt::cpu {

// ---- helpers -------------------------------------------------------------------

void fill_f32(float* data, int64_t count, float value);
// dst = src, or dst += src when accumulate.
void copy_or_add(const float* src, float* dst, int64_t count, bool accumulate);

// ---- linear: y (n, out) = x (n, in) * w^T + bias; w (out, in) as in PyTorch ----

void linear_forward(const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t in, int64_t out);
// dx (n, in) = dy (n, out) * w
void linear_backward_data(const float* w, const float* dy, float* dx, int64_t n, int64_t in,
                          int64_t out, bool accumulate);
// dw (out, in) = dy^T * x
void linear_backward_weights(const float* x, const float* dy, float* dw, int64_t n, int64_t in,
                             int64_t out, bool accumulate);
// dbias (out) = sum over n of dy
void linear_backward_bias(const float* dy, float* dbias, int64_t n, int64_t out, bool accumulate);

// ---- relu (in place allowed: y may equal x; backward needs only y) --------------

void relu_forward(const float* x, float* y, int64_t count);
void relu_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate);
// The compact form (runtime/ops.h): one bit per element, y[i] > 0, instead of y.
void relu_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count);
void relu_backward_mask(const uint8_t* mask, const float* dy, float* dx, int64_t count, bool accumulate);

// ---- max / avg pooling, PyTorch semantics (pad, ceil_mode; avg pooling with
// count_include_pad=True, PyTorch's default) ---------------------------------------


void max_pool_forward(const PoolShape& shape, const float* x, float* y);
// Routes each dy to the first element of its window equal to y (the first
// maximum, as PyTorch's CPU kernel picks it). Needs x, y and dy (as cuDNN).
void max_pool_backward(const PoolShape& shape, const float* x, const float* y, const float* dy,
                       float* dx, bool accumulate);
// The compact form (runtime/ops.h): one byte per output, the place in its
// window of the element max_pool_backward routes to (255: none).
void max_pool_forward_indices(const PoolShape& shape, const float* x, float* y, uint8_t* index);
void max_pool_backward_indices(const PoolShape& shape, const uint8_t* index, const float* dy, float* dx,
                               bool accumulate);
void avg_pool_forward(const PoolShape& shape, const float* x, float* y);
void avg_pool_backward(const PoolShape& shape, const float* dy, float* dx, bool accumulate);

// y (n, c) = mean over hw of x (n, c, hw).
void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw);
void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate);

// ---- batch normalisation, training mode (PyTorch semantics) ----------------------
// Statistics over the n*hw values of each channel of this call (the sub-batch:
// docs/generated-program.md, "Semantics"). Saves the batch mean and
// 1/sqrt(biased var + eps) for backward; updates the running statistics with
// momentum, the running variance from the unbiased variance, as PyTorch does.

void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                             float momentum);
// Evaluation mode: normalises with the running statistics.
void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 int64_t n, int64_t c, int64_t hw, float eps);
// dx, and dgamma/dbeta (per channel); separate flags since dx is per sub-batch and
// the parameter gradients accumulate across sub-batches.
void batchnorm_backward(const float* x, const float* gamma, const float* save_mean,
                        const float* save_invstd, const float* dy, float* dx, float* dgamma,
                        float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate_dx,
                        bool accumulate_params);
// dx alone (BP1), no scratch: the channel sums are computed again.
void batchnorm_backward_data(const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, int64_t n,
                             int64_t c, int64_t hw, bool accumulate);
// dgamma, dbeta alone (BP2).
void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c,
                               int64_t hw, bool accumulate);
// The forward from the saved statistics, running statistics untouched: the
// same y as batchnorm_forward_train gave (exact recomputation).
void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw);

// ---- local response normalisation across channels (PyTorch LocalResponseNorm):
// y = x / (k + alpha/size * sum of x^2 over channels [c - size/2, c + (size-1)/2])^beta

void lrn_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k);
// Needs only x (the scale is recomputed).
void lrn_backward(const float* x, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                  int64_t size, float alpha, float beta, float k, bool accumulate);

// ---- dropout ---------------------------------------------------------------------
// The mask is a counter-based hash of (seed, step, global sample index, element
// index within the sample), not of the sub-batch, so every sub-batch division
// drops the same elements (docs/generated-program.md, "Semantics"). Kept
// elements are scaled by 1/(1-p).

// The uniform [0, 1) number that decides element `element` of sample `sample`.
float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element);
// x, y: (n, sample_elements); first_sample: the global index of this call's first
// sample in the mini-batch. mask: n*sample_elements bytes, 1 = kept.
void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step);
void dropout_backward(const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate);

// ---- add (residual join), concat (channel axis), flatten -------------------------

// y = sum of the input_count inputs, each of count floats.
void add_forward(const float* const* inputs, int input_count, float* y, int64_t count);
// One call per input: dx_i = dy (or += dy).
void add_backward(const float* dy, float* dx, int64_t count, bool accumulate);
// y (n, sum of channels, hw) = the inputs (n, channels[i], hw) side by side.
void concat_forward(const float* const* inputs, const int64_t* channels, int input_count,
                    float* y, int64_t n, int64_t hw);
// One call per input: dx (n, channels, hw) = dy[:, channel_offset : channel_offset+channels].
void concat_backward(const float* dy, float* dx, int64_t n, int64_t total_channels,
                     int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate);
void flatten_forward(const float* x, float* y, int64_t count);
void flatten_backward(const float* dy, float* dx, int64_t count, bool accumulate);

// ---- softmax cross-entropy (the loss) --------------------------------------------
// forward: probs (n, classes) = softmax(logits); *loss_sum = sum over the n samples
// of -log probs[label] (or += when accumulate_loss, to sum over sub-batches).
void softmax_xent_forward(const float* logits, const int32_t* labels, float* probs,
                          float* loss_sum, int64_t n, int64_t classes, bool accumulate_loss,
                          float label_smoothing = 0.0f);
// The evaluation's loss and hits (runtime/ops.h softmax_xent_evaluate).
void softmax_xent_evaluate(const float* logits, const int32_t* labels, float* probs, float* metrics, int64_t n,
                           int64_t classes, float label_smoothing);
// dlogits = (probs - target) * scale, target = (1 - e) onehot(labels) + e/classes
// (label smoothing e), scale = 1 / full mini-batch size, so the loss is
// averaged over the whole batch across sub-batches (docs/generated-program.md, "Semantics").
void softmax_xent_backward(const float* probs, const int32_t* labels, float* dlogits, int64_t n,
                           int64_t classes, float scale, bool accumulate, float label_smoothing = 0.0f);

// ---- SGD with momentum and weight decay, exactly torch.optim.SGD (no dampening):
// d = g + wd*w; buf = d on the first step, else momentum*buf + d; w -= lr*buf,
// or with Nesterov w -= lr*(d + momentum*buf). With momentum == 0, w -= lr*d
// and buf is unused (may be null).
void sgd_step(float* w, const float* g, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay, bool first_step, bool nesterov = false);
// ---- AdamW, torch.optim.AdamW (runtime/ops.h); step is the iteration (t = step + 1).
void adamw_step(float* w, const float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr, float beta1,
                float beta2, float eps, float weight_decay, uint64_t step);

}  // namespace mplan::rt::cpu
