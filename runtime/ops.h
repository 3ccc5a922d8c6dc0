#pragma once
// The op half of the backend-neutral runtime API: every kernel a generated
// program calls, forward and backward, for every op of the model table. The
// CPU backend (runtime/cpu/ops.cpp) and the CUDA backend (runtime/cuda/)
// implement exactly these declarations, so one generated train.cpp builds
// against either.
//
// Every op takes its execution context first (the stream it is enqueued on,
// with its library handles) and returns at once: the op runs when the stream
// reaches it. Pointers are into the program's device memory (runtime/device.h)
// and must stay valid until then; scratch memory is the explicit `workspace`,
// planned like every other buffer. Shapes: n samples in this call (the
// sub-batch), c channels, hw = h*w the spatial size; NCHW float32.
//
// Gradient accumulation (moDNN §III): every op that writes a gradient takes
// `accumulate`: false writes it, true adds to it (a second consumer of the same
// tensor, or a later sub-batch). Weight gradients always accumulate: the
// update zeroes them after use (sgd_step), so sub-batches sum into them.
//
// This header declares convolution, linear, the element-wise ops, pooling,
// batch norm, LRN, dropout, concat, the loss and the update, and includes the
// other families' headers (activations, attention, channel ops, embeddings,
// layer normalisation): it is the one include of the API. The list of
// kernels is runtime/kernels.def; runtime/kernel_call.h runs them from data
// (the profilers) and names them (codegen).

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/device.h"
#include "runtime/types.h"

namespace mplan::rt {

// ---- convolution: the backend's algorithms ------------------------------------------

// Algorithms of a direction are the ids 0 .. conv_algorithm_count(direction)-1
// (cuDNN's legacy enum on CUDA), and on CUDA also the graph-API engine
// configurations kGraphAlgorithmBase + r, r < kGraphAlgorithms, named
// "graph_<r>" (runtime/cuda/conv_graph.h); the CPU has none of those.
int conv_algorithm_count(ConvDirection direction);
inline constexpr ConvAlgoId kGraphAlgorithmBase = 100;
inline constexpr int kGraphAlgorithms = 8;
// Every algorithm id of the backend for a direction, legacy first.
std::vector<ConvAlgoId> conv_algorithm_ids(ConvDirection direction);
// r of the graph id kGraphAlgorithmBase + r; -1 for another id.
inline int graph_algorithm_rank(ConvAlgoId algo) {
  return algo >= kGraphAlgorithmBase && algo < kGraphAlgorithmBase + kGraphAlgorithms ? algo - kGraphAlgorithmBase
                                                                                       : -1;
}
// The id of "graph_<r>"; -1 for another name.
inline ConvAlgoId graph_algorithm_id(std::string_view name) {
  constexpr std::string_view prefix = "graph_";
  if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size()) return -1;
  int r = -1;
  const std::string_view digits = name.substr(prefix.size());
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
  if (error != std::errc() || end != digits.data() + digits.size() || r < 0 || r >= kGraphAlgorithms) return -1;
  return kGraphAlgorithmBase + r;
}
// The backend's name of an algorithm: "gemm" on the CPU, "implicit_gemm" on CUDA
// (cuDNN's enum name, lower case, without the prefix).
const char* conv_algorithm_name(ConvDirection direction, ConvAlgoId algo);
// Workspace the algorithm needs for the shape (shape.n images), in bytes; -1
// when the backend does not support it for this shape. On CUDA cuDNN answers
// (cudnnGetConvolution*WorkspaceSize), so it needs the context's handle.
int64_t conv_workspace_bytes(const Context& ctx, ConvDirection direction, const ConvShape& shape,
                             ConvAlgoId algo);

// y = conv(x, w) + bias (bias may be null). The workspace must hold what
// conv_workspace_bytes says; a backend whose planned algorithm needs more than
// workspace_bytes runs one that fits and says so once (stderr).
void conv_forward(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x,
                  const float* w, const float* bias, float* y, void* workspace, int64_t workspace_bytes);
// dx = conv_transpose(dy, w): the gradient with respect to the input (BP1).
void conv_backward_data(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* w,
                        const float* dy, float* dx, void* workspace, int64_t workspace_bytes, bool accumulate);
// dw += correlation of x with dy over the batch: the filter gradient (BP2).
void conv_backward_filter(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x,
                          const float* dy, float* dw, void* workspace, int64_t workspace_bytes);
// dbias[k] += sum over n, p, q of dy.
void conv_backward_bias(const Context& ctx, const ConvShape& shape, const float* dy, float* dbias);

// The same convolutions run as consecutive micro-batches (mu-cuDNN §II-III),
// each by its own algorithm, sharing one workspace (the largest of theirs).
void conv_forward_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                        const float* w, const float* bias, float* y, void* workspace, int64_t workspace_bytes);
void conv_backward_data_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* w,
                              const float* dy, float* dx, void* workspace, int64_t workspace_bytes,
                              bool accumulate);
void conv_backward_filter_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                                const float* dy, float* dw, void* workspace, int64_t workspace_bytes);

// ---- linear: y (n, out) = x (n, in) * w^T + bias; w (out, in) as in PyTorch -------

void linear_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y,
                    int64_t n, int64_t in, int64_t out);
// dx (n, in) = dy (n, out) * w
void linear_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, int64_t n,
                          int64_t in, int64_t out, bool accumulate);
// dw (out, in) += dy^T * x
void linear_backward_weights(const Context& ctx, const float* x, const float* dy, float* dw, int64_t n,
                             int64_t in, int64_t out);
// dbias (out) += sum over n of dy
void linear_backward_bias(const Context& ctx, const float* dy, float* dbias, int64_t n, int64_t out);

// ---- element-wise -------------------------------------------------------------------

// dst = src, or dst += src when accumulate (add's forward and backward, flatten).
void copy_or_add(const Context& ctx, const float* src, float* dst, int64_t count, bool accumulate);
// y = a + b: add's forward over its first two inputs in one pass (a copy and
// an add took two, five memory passes against three). y may equal a or b.
void add_two(const Context& ctx, const float* a, const float* b, float* y, int64_t count);
// y = max(x, 0); y may equal x (in place).
void relu_forward(const Context& ctx, const float* x, float* y, int64_t count);
// dx = dy * (y > 0); needs only y, so dx may equal dy (in place).
void relu_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count,
                   bool accumulate);
// The compact form (docs/planner.md, "Memory-saving variants"): forward also
// writes one bit per element, bit i % 8 of mask[i / 8] = (y[i] > 0), i.e.
// ceil(count / 8) bytes; backward reads the bits instead of y and gives the
// same dx bit for bit. y may equal x, dx may equal dy.
void relu_forward_mask(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t count);
void relu_backward_mask(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count,
                        bool accumulate);

// ---- pooling ------------------------------------------------------------------------

void max_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y);
// Routes each dy to the first maximum of its window (PyTorch's CPU rule);
// needs x, y and dy (as cuDNN).
void max_pool_backward(const Context& ctx, const PoolShape& shape, const float* x, const float* y,
                       const float* dy, float* dx, bool accumulate);
// The compact form: forward also writes, per output, the place of the
// maximum that backward routes to (the first element equal to y in the
// window's row-major order, as max_pool_backward picks it) as one byte,
// (i - window row) * kernel_w + (j - window column), or 255 where no element
// equals y (a window of NaN); the window has at most 255 elements. Backward
// reads those bytes instead of x and y and gives the same dx bit for bit.
void max_pool_forward_indices(const Context& ctx, const PoolShape& shape, const float* x, float* y, uint8_t* index);
void max_pool_backward_indices(const Context& ctx, const PoolShape& shape, const uint8_t* index, const float* dy,
                               float* dx, bool accumulate);
void avg_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y);
void avg_pool_backward(const Context& ctx, const PoolShape& shape, const float* dy, float* dx, bool accumulate);
// y (n, c) = mean over hw of x (n, c, hw).
void global_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw);
void global_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate);

// ---- batch normalisation, training mode (PyTorch semantics) -------------------------
// Statistics over the n*hw values of each channel of this call (the sub-batch;
// the plan says when a batch is split). Saves the batch mean and
// 1/sqrt(biased var + eps); updates the running statistics with momentum, the
// running variance from the unbiased variance, as PyTorch does.
void batchnorm_forward_train(const Context& ctx, const float* x, const float* gamma, const float* beta,
                             float* y, float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, int64_t n, int64_t c, int64_t hw, float eps, float momentum);
// The forward again from the saved statistics, without touching the running
// ones: exact recomputation (SuperNeurons §3.4 extended to batch norm).
void batchnorm_forward_saved(const Context& ctx, const float* x, const float* gamma, const float* beta,
                             const float* save_mean, const float* save_invstd, float* y, int64_t n, int64_t c,
                             int64_t hw);
// Evaluation mode (PyTorch's eval()): y = gamma (x - running mean) /
// sqrt(running var + eps) + beta; the running statistics are only read.
void batchnorm_forward_inference(const Context& ctx, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y, int64_t n,
                                 int64_t c, int64_t hw, float eps);
// dx (BP1). workspace: 2*c floats for the per-channel sums of dy and dy*x_hat.
// dx may be dy itself (in place, not accumulating): the sums are taken first.
void batchnorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, float* workspace, int64_t n,
                             int64_t c, int64_t hw, bool accumulate);
// dgamma += sum(dy * x_hat), dbeta += sum(dy) per channel (BP2).
void batchnorm_backward_params(const Context& ctx, const float* x, const float* save_mean,
                               const float* save_invstd, const float* dy, float* dgamma, float* dbeta, int64_t n,
                               int64_t c, int64_t hw);

// ---- local response normalisation across channels (PyTorch LocalResponseNorm) -----
// y = x / (k + alpha/size * sum of x^2 over channels [c - size/2, c + (size-1)/2])^beta
void lrn_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k);
// Reads x, y and dy (cuDNN's cudnnLRNCrossChannelBackward needs all three).
void lrn_backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx, int64_t n,
                  int64_t c, int64_t hw, int64_t size, float alpha, float beta, float k, bool accumulate);

// ---- dropout ------------------------------------------------------------------------
// The mask is a counter-based hash of (seed, step, global sample index, element
// index within the sample), never of the sub-batch, so every division of the
// batch drops the same elements (docs/generated-program.md, "Semantics"). Kept
// elements scale by 1/(1-p).
// x, y: (n, sample_elements); first_sample: the global index of the call's
// first sample; mask: one byte per element, 1 = kept.
void dropout_forward(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t n,
                     int64_t sample_elements, int64_t first_sample, float p, uint64_t seed, uint64_t step);
void dropout_backward(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate);
// The uniform [0, 1) number that decides element `element` of sample `sample`
// (the same function on every backend).
float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element);

// ---- concat (channel axis), one call per input --------------------------------------

// y[:, channel_offset : channel_offset + channels] = x (n, channels, hw).
void concat_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t total_channels,
                    int64_t channel_offset, int64_t channels, int64_t hw);
// dx (n, channels, hw) = dy[:, channel_offset : channel_offset + channels].
void concat_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t total_channels,
                     int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate);

// ---- softmax cross-entropy (the loss) -----------------------------------------------
// probs (n, classes) = softmax(logits); *loss = sum over the n samples of
// -log probs[label] (summed; the program averages over the full batch).
// With label_smoothing e (PyTorch's CrossEntropyLoss(label_smoothing=e)), each
// sample's loss is (1 - e) (-log p_label) + e/classes sum_k (-log p_k).
void softmax_xent_forward(const Context& ctx, const float* logits, const int32_t* labels, float* probs,
                          float* loss, int64_t n, int64_t classes, float label_smoothing = 0.0f);
// The evaluation's loss (docs/generated-program.md, "Evaluation"): probs as
// above, and metrics[4] = {the summed loss, the samples whose label is the
// top-1 class, those whose label is among the top 5, the samples counted}.
// A sample whose label is negative (the padding of a last, partial batch) is
// not counted. A label is among the top k when fewer than k classes have a
// logit strictly above its own (a tie counts as a hit).
void softmax_xent_evaluate(const Context& ctx, const float* logits, const int32_t* labels, float* probs,
                           float* metrics, int64_t n, int64_t classes, float label_smoothing);
// dlogits = (probs - target) * scale, target = (1 - e) onehot(labels) + e/classes;
// scale = 1/B averages over the whole mini-batch across sub-batches
// (docs/generated-program.md, "Semantics").
void softmax_xent_backward(const Context& ctx, const float* probs, const int32_t* labels, float* dlogits,
                           int64_t n, int64_t classes, float scale, bool accumulate, float label_smoothing = 0.0f);

// ---- the update ---------------------------------------------------------------------
// torch.optim.SGD (no dampening): d = g + wd*w; buf = d on the first step,
// else momentum*buf + d; w -= lr*buf, or with Nesterov w -= lr*(d +
// momentum*buf) (with momentum 0: w -= lr*d, buf unused, may be null). Then
// g = 0, so the next iteration's sub-batches accumulate into a clean gradient.
void sgd_step(const Context& ctx, float* w, float* g, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay, bool first_step, bool nesterov = false);
// torch.optim.AdamW (amsgrad off): w *= 1 - lr*wd; m = b1*m + (1-b1)*g;
// v = b2*v + (1-b2)*g*g; w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps),
// with t = step + 1 (the iteration's update, 1-based). Then g = 0.
void adamw_step(const Context& ctx, float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr,
                float beta1, float beta2, float eps, float weight_decay, uint64_t step);

}  // namespace mplan::rt

// The other families of kernels, under the rules above.
#include "runtime/ops_activations.h"
#include "runtime/ops_attention.h"
#include "runtime/ops_casts.h"
#include "runtime/ops_channel.h"
#include "runtime/ops_embeddings.h"
#include "runtime/ops_normalization.h"
#include "runtime/ops_sixteen_bit.h"
