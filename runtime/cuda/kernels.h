#pragma once
// The CUDA backend's own kernels, where cuDNN and cuBLAS have none or none
// with the CPU backend's exact semantics. Each function enqueues its kernel(s)
// on `stream` and checks the launch. Semantics are those of the CPU kernels
// named in each comment (runtime/cpu/*.cpp), which the GPU tests
// (tests/gpu/) compare against.
//
// Host-callable declarations only, so that the .cpp files of the backend
// (compiled by the host compiler) can call the .cu files' launchers.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/types.h"

namespace mplan::rt::cuda {

// ---- element-wise (elementwise.cu) ------------------------------------------------------

// bytes / 4 words of `pattern`, then the remaining bytes set to its low byte
// (runtime/cpu/device.cpp fill_u32_async).
void fill_u32(void* dst, uint32_t pattern, size_t bytes, cudaStream_t stream);
// dst = src, bytes of them, by a kernel (16 bytes per thread where both are
// 16-byte aligned): copy_or_add's copy, and store_to_host_async's store into
// mapped pinned memory. Not cudaMemcpyAsync: that runs on a copy engine, where
// a compute stream's copy can queue behind the d2h stream's offloads
// (runtime/device.h, store_to_host_async).
void copy_bytes(const void* src, void* dst, size_t bytes, cudaStream_t stream);
// y = a + b (runtime/cpu/elementwise.cpp add_forward of two inputs); y may be a or b.
void add_two(const float* a, const float* b, float* y, int64_t count, cudaStream_t stream);
// dst += src (copy_or_add with accumulate).
void add(const float* src, float* dst, int64_t count, cudaStream_t stream);
// y = x > 0 ? x : 0 (runtime/cpu/elementwise.cpp relu_forward), NaN kept; y may be x.
// Not cudnnActivationForward: ResNet-50's 49 relus took 3.72 ms of its H200
// profile through cuDNN, PyTorch's own kernel 2.31 ms (docs/gpu-validation.md).
void relu_forward(const float* x, float* y, int64_t count, cudaStream_t stream);
// dx = dy * (y > 0), or += (runtime/cpu/elementwise.cpp relu_backward); dx may be dy.
void relu_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate, cudaStream_t stream);
// The compact form of relu_forward / relu_backward (docs/planner.md,
// "Memory-saving variants"; runtime/ops.h): forward also writes bit i % 8 of
// mask[i / 8] = (y[i] > 0), ceil(count / 8) bytes, bits past count 0; backward
// reads the bits instead of y, dx as relu_backward's bit for bit. y may be x,
// dx may be dy.
void relu_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count, cudaStream_t stream);
void relu_backward_mask(const uint8_t* mask, const float* dy, float* dx, int64_t count, bool accumulate,
                        cudaStream_t stream);
// y[b, o] = bias[o] for the n rows of y (n, out): linear_forward's bias, added
// by the SGEMM's beta = 1 (runtime/cpu/linear.cpp).
void broadcast_rows(const float* bias, float* y, int64_t n, int64_t out, cudaStream_t stream);
// dbias[o] += sum over the n rows of dy (n, out) (linear_backward_bias).
void sum_rows_into(const float* dy, float* dbias, int64_t n, int64_t out, cudaStream_t stream);
void global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t stream);
void global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw, bool accumulate,
                              cudaStream_t stream);
// The counter-based mask of runtime/dropout_hash.h, as runtime/cpu/dropout.cpp.
void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step, cudaStream_t stream);
void dropout_backward(const uint8_t* mask, const float* dy, float* dx, int64_t count, float p, bool accumulate,
                      cudaStream_t stream);
void concat_forward(const float* x, float* y, int64_t n, int64_t total_channels, int64_t channel_offset,
                    int64_t channels, int64_t hw, cudaStream_t stream);
void concat_backward(const float* dy, float* dx, int64_t n, int64_t total_channels, int64_t channel_offset,
                     int64_t channels, int64_t hw, bool accumulate, cudaStream_t stream);
// *loss = sum over samples of logsumexp(logits) - logits[label] (with label
// smoothing e: (1 - e) that + e/classes sum_k (logsumexp - logits[k])), from
// the logits (runtime/cpu/softmax_xent.cpp); NaN when a label is outside
// [0, classes), so the program's finite-loss check stops the run.
void softmax_xent_loss(const float* logits, const int32_t* labels, float* loss, int64_t n, int64_t classes,
                       float label_smoothing, cudaStream_t stream);
// metrics[4] = {summed loss, top-1 hits, top-5 hits, samples counted} over the
// samples whose label is not negative (runtime/ops.h softmax_xent_evaluate).
void softmax_xent_metrics(const float* logits, const int32_t* labels, float* metrics, int64_t n, int64_t classes,
                          float label_smoothing, cudaStream_t stream);
// dlogits = (probs - target) * scale (or += when accumulate), target the
// smoothed one-hot (runtime/cpu/softmax_xent.cpp).
void softmax_xent_grad(const float* probs, const int32_t* labels, float* dlogits, int64_t n, int64_t classes,
                       float scale, bool accumulate, float label_smoothing, cudaStream_t stream);
// torch.optim.AdamW's update (runtime/cpu/adamw.cpp), then g = 0.
void adamw_step(float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr, float beta1,
                float beta2, float eps, float weight_decay, uint64_t step, cudaStream_t stream);
// torch.optim.SGD's update (runtime/cpu/sgd.cpp), then g = 0.
void sgd_step(float* w, float* g, float* momentum_buf, int64_t count, float lr, float momentum, float weight_decay,
              bool first_step, bool nesterov, cudaStream_t stream);

// ---- pooling (pool.cu), PyTorch semantics as runtime/cpu/pool.cpp -----------------------

void max_pool_forward(const PoolShape& shape, const float* x, float* y, cudaStream_t stream);
// Each input element gathers dy from the windows whose first maximum it is.
void max_pool_backward(const PoolShape& shape, const float* x, const float* y, const float* dy, float* dx,
                       bool accumulate, cudaStream_t stream);
// The compact form of max_pool_forward / max_pool_backward (docs/planner.md,
// "Memory-saving variants"; runtime/ops.h): forward also writes, per output,
// the place in its unclipped window (row * kernel_w + column) of the first
// element equal to y, 255 where none is (NaN windows; kernel_h * kernel_w <=
// 255); backward gathers dy by those bytes instead of x and y, dx as
// max_pool_backward's bit for bit.
void max_pool_forward_indices(const PoolShape& shape, const float* x, float* y, uint8_t* index,
                              cudaStream_t stream);
void max_pool_backward_indices(const PoolShape& shape, const uint8_t* index, const float* dy, float* dx,
                               bool accumulate, cudaStream_t stream);
void avg_pool_forward(const PoolShape& shape, const float* x, float* y, cudaStream_t stream);
void avg_pool_backward(const PoolShape& shape, const float* dy, float* dx, bool accumulate, cudaStream_t stream);

// ---- batch normalisation (batchnorm.cu), as runtime/cpu/batchnorm*.cpp ---------------------

// The whole training forward: statistics in double, one block per channel.
// Used where cuDNN's is not (a channel of a single value).
void batchnorm_forward_train(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                             float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c,
                             int64_t hw, float eps, float momentum, cudaStream_t stream);
void batchnorm_forward_saved(const float* x, const float* gamma, const float* beta, const float* save_mean,
                             const float* save_invstd, float* y, int64_t n, int64_t c, int64_t hw,
                             cudaStream_t stream);
// Evaluation mode: normalises with the running statistics.
void batchnorm_forward_inference(const float* x, const float* gamma, const float* beta, const float* running_mean,
                                 const float* running_var, float* y, int64_t n, int64_t c, int64_t hw, float eps,
                                 cudaStream_t stream);
// workspace: 2*c floats (sum of dy*x_hat, then sum of dy, per channel). dx may
// be dy itself (in place, not accumulating): the sums kernel runs first.
void batchnorm_backward_data(const float* x, const float* gamma, const float* save_mean, const float* save_invstd,
                             const float* dy, float* dx, float* workspace, int64_t n, int64_t c, int64_t hw,
                             bool accumulate, cudaStream_t stream);
void batchnorm_backward_params(const float* x, const float* save_mean, const float* save_invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, cudaStream_t stream);

// ---- local response normalisation (lrn.cu), as runtime/cpu/lrn.cpp -------------------------
// For the windows cuDNN does not take (an even size, or parameters out of its range).

void lrn_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size, float alpha, float beta,
                 float k, cudaStream_t stream);
void lrn_backward(const float* x, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw, int64_t size,
                  float alpha, float beta, float k, bool accumulate, cudaStream_t stream);

}  // namespace mplan::rt::cuda
