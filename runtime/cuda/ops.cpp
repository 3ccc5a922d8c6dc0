// The CUDA backend of runtime/ops.h, all but the convolutions (conv.cpp):
// cuBLAS SGEMM for linear layers, cuDNN for ReLU, softmax, LRN and the
// training forward of batch norm, the backend's own kernels (kernels.h) for
// the rest. Every op enqueues on its context's stream and returns.
//
// Which library runs what, and why (each checked against the CPU backend by
// tests/gpu/):
//   - ReLU forward: cudnnActivationForward, in place allowed (x = y, one
//     descriptor; cuDNN API reference). Backward is an own kernel, dx = dy *
//     (y > 0) as the CPU: ops.h gives it only y (x may have been overwritten in
//     place), and cudnnActivationBackward is specified in terms of x, without
//     saying how it treats x = 0, so y cannot stand in for x safely.
//   - batch norm, training forward: cudnnBatchNormalizationForwardTraining,
//     as PyTorch's cudnn_batch_norm calls it: exponentialAverageFactor =
//     momentum (running = (1 - factor) * running + factor * batch; cudnn_ops.h)
//     and no correction of the running variance, which PyTorch documents as
//     the unbiased one; resultSaveInvVariance is 1/sqrt(biased var + eps).
//     Channels of one value, and epsilons below CUDNN_BN_MIN_EPSILON, take the
//     own kernel. Its other kernels are own kernels (ops.h allows it).
//   - LRN: cudnnLRNCrossChannel* where cuDNN's window is PyTorch's: an odd size
//     (cuDNN looks back floor((n-1)/2) channels, PyTorch size/2: equal when odd),
//     within cuDNN's limits (CUDNN_LRN_MIN_N..MAX_N, MIN_K, MIN_BETA). cuDNN
//     divides alpha by the window size as PyTorch does (Caffe passes its alpha,
//     also alpha/size, to cudnnSetLRNDescriptor unchanged: BVLC caffe
//     cudnn_lrn_layer.cpp). Other windows take the own kernel.
//   - pooling: own kernels (pool.cu says why not cuDNN's).

#include <algorithm>
#include <climits>

#include "runtime/check.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/dropout_hash.h"
#include "runtime/ops.h"

MPLAN_CUDNN_LEGACY_BEGIN

namespace mplan::rt {
namespace {

using cuda::Launch;

const float kOne = 1.0f, kZero = 0.0f;

int to_int(int64_t value, const char* what) {
  MPLAN_RT_CHECK(value >= 0 && value <= INT_MAX, what);
  return static_cast<int>(value);
}

// An NCHW float tensor descriptor for the length of one call.
class TensorDesc {
 public:
  TensorDesc(int64_t n, int64_t c, int64_t h, int64_t w) {
    MPLAN_RT_CHECK(n * c * h * w <= INT_MAX, "a tensor of 2^31 elements or more for cuDNN");
    MPLAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    MPLAN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                 static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
  }
  ~TensorDesc() { MPLAN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(desc_)); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

bool lrn_on_cudnn(int64_t size, float beta, float k) {
  return size % 2 == 1 && size >= CUDNN_LRN_MIN_N && size <= CUDNN_LRN_MAX_N && k >= CUDNN_LRN_MIN_K &&
         beta >= CUDNN_LRN_MIN_BETA;
}

class LrnDesc {
 public:
  LrnDesc(int64_t size, float alpha, float beta, float k) {
    MPLAN_CUDNN_CHECK(cudnnCreateLRNDescriptor(&desc_));
    MPLAN_CUDNN_CHECK(cudnnSetLRNDescriptor(desc_, static_cast<unsigned>(size), alpha, beta, k));
  }
  ~LrnDesc() { MPLAN_CUDNN_CHECK(cudnnDestroyLRNDescriptor(desc_)); }
  LrnDesc(const LrnDesc&) = delete;
  LrnDesc& operator=(const LrnDesc&) = delete;
  operator cudnnLRNDescriptor_t() const { return desc_; }

 private:
  cudnnLRNDescriptor_t desc_ = nullptr;
};

}  // namespace

// ---- linear: row-major PyTorch layout on column-major cuBLAS ---------------------------------
// A row-major (rows x cols) matrix is the column-major (cols x rows) one, its
// transpose, so row-major C = A * B is column-major C^T = B^T * A^T.

void linear_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t in, int64_t out) {
  if (n == 0 || out == 0) return;
  Launch L(ctx);
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  if (bias != nullptr) cuda::broadcast_rows(bias, y, n, out, L.stream());
  // y^T (out x n) = w (out x in; stored as w^T, in x out) ^T * x^T (in x n)
  MPLAN_CUBLAS_CHECK(cublasSgemm(L.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n_, in_, &kOne, w, in_, x, in_,
                                 bias != nullptr ? &kOne : &kZero, y, out_));
}

void linear_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, int64_t n, int64_t in,
                          int64_t out, bool accumulate) {
  if (n == 0 || in == 0) return;
  Launch L(ctx);
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  // dx^T (in x n) = w^T (in x out) * dy^T (out x n)
  MPLAN_CUBLAS_CHECK(cublasSgemm(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &kOne, w, in_, dy, out_,
                                 accumulate ? &kOne : &kZero, dx, in_));
}

void linear_backward_weights(const Context& ctx, const float* x, const float* dy, float* dw, int64_t n, int64_t in,
                             int64_t out) {
  if (n == 0 || in == 0 || out == 0) return;
  Launch L(ctx);
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  // dw^T (in x out) += x^T (in x n) * dy (n x out; stored as dy^T, out x n)
  MPLAN_CUBLAS_CHECK(
      cublasSgemm(L.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &kOne, x, in_, dy, out_, &kOne, dw, in_));
}

void linear_backward_bias(const Context& ctx, const float* dy, float* dbias, int64_t n, int64_t out) {
  Launch L(ctx);
  cuda::sum_rows_into(dy, dbias, n, out, L.stream());
}

// ---- element-wise -------------------------------------------------------------------------

void copy_or_add(const Context& ctx, const float* src, float* dst, int64_t count, bool accumulate) {
  if (count <= 0) return;
  Launch L(ctx);
  if (accumulate) {
    cuda::add(src, dst, count, L.stream());
    return;
  }
  if (dst == src) return;
  MPLAN_RT_CHECK(dst + count <= src || src + count <= dst, "copy_or_add: source and destination overlap");
  cuda::copy_bytes(src, dst, static_cast<size_t>(count) * sizeof(float), L.stream());
}

void add_two(const Context& ctx, const float* a, const float* b, float* y, int64_t count) {
  if (count <= 0) return;
  Launch L(ctx);
  cuda::add_two(a, b, y, count, L.stream());
}

void relu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  if (count <= 0) return;
  Launch L(ctx);
  cuda::relu_forward(x, y, count, L.stream());
}

void relu_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  Launch L(ctx);
  cuda::relu_backward(y, dy, dx, count, accumulate, L.stream());
}

// The compact forms (docs/planner.md, "Memory-saving variants"): a bit mask in place of y.
void relu_forward_mask(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t count) {
  if (count <= 0) return;
  Launch L(ctx);
  cuda::relu_forward_mask(x, y, mask, count, L.stream());
}

void relu_backward_mask(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  Launch L(ctx);
  cuda::relu_backward_mask(mask, dy, dx, count, accumulate, L.stream());
}

// ---- pooling --------------------------------------------------------------------------------

void max_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y) {
  Launch L(ctx);
  cuda::max_pool_forward(shape, x, y, L.stream());
}
void max_pool_backward(const Context& ctx, const PoolShape& shape, const float* x, const float* y, const float* dy,
                       float* dx, bool accumulate) {
  Launch L(ctx);
  cuda::max_pool_backward(shape, x, y, dy, dx, accumulate, L.stream());
}
// The compact forms: one byte per output (the window's chosen place) in place of x and y.
void max_pool_forward_indices(const Context& ctx, const PoolShape& shape, const float* x, float* y,
                              uint8_t* index) {
  Launch L(ctx);
  cuda::max_pool_forward_indices(shape, x, y, index, L.stream());
}
void max_pool_backward_indices(const Context& ctx, const PoolShape& shape, const uint8_t* index, const float* dy,
                               float* dx, bool accumulate) {
  Launch L(ctx);
  cuda::max_pool_backward_indices(shape, index, dy, dx, accumulate, L.stream());
}
void avg_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y) {
  Launch L(ctx);
  cuda::avg_pool_forward(shape, x, y, L.stream());
}
void avg_pool_backward(const Context& ctx, const PoolShape& shape, const float* dy, float* dx, bool accumulate) {
  Launch L(ctx);
  cuda::avg_pool_backward(shape, dy, dx, accumulate, L.stream());
}
void global_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  Launch L(ctx);
  cuda::global_avg_pool_forward(x, y, n * c, hw, L.stream());
}
void global_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate) {
  Launch L(ctx);
  cuda::global_avg_pool_backward(dy, dx, n * c, hw, accumulate, L.stream());
}

// ---- batch normalisation ------------------------------------------------------------------

void batchnorm_forward_train(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             int64_t n, int64_t c, int64_t hw, float eps, float momentum) {
  if (n * c * hw <= 0) return;
  Launch L(ctx);
  if (n * hw <= 1 || eps < CUDNN_BN_MIN_EPSILON || n * c * hw > INT_MAX) {
    cuda::batchnorm_forward_train(x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps,
                                  momentum, L.stream());
    return;
  }
  // Spatial mode normalises each channel over n, h and w; hw as (hw, 1) is the same layout.
  const TensorDesc xd(n, c, hw, 1), bnd(1, c, 1, 1);
  MPLAN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(L.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x,
                                                           xd, y, bnd, gamma, beta, momentum, running_mean,
                                                           running_var, eps, save_mean, save_invstd));
}

void batchnorm_forward_saved(const Context& ctx, const float* x, const float* gamma, const float* beta,
                             const float* save_mean, const float* save_invstd, float* y, int64_t n, int64_t c,
                             int64_t hw) {
  Launch L(ctx);
  cuda::batchnorm_forward_saved(x, gamma, beta, save_mean, save_invstd, y, n, c, hw, L.stream());
}

void batchnorm_forward_inference(const Context& ctx, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y, int64_t n,
                                 int64_t c, int64_t hw, float eps) {
  Launch L(ctx);
  cuda::batchnorm_forward_inference(x, gamma, beta, running_mean, running_var, y, n, c, hw, eps, L.stream());
}

void batchnorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, float* workspace, int64_t n,
                             int64_t c, int64_t hw, bool accumulate) {
  Launch L(ctx);
  cuda::batchnorm_backward_data(x, gamma, save_mean, save_invstd, dy, dx, workspace, n, c, hw, accumulate,
                                L.stream());
}

void batchnorm_backward_params(const Context& ctx, const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw) {
  Launch L(ctx);
  cuda::batchnorm_backward_params(x, save_mean, save_invstd, dy, dgamma, dbeta, n, c, hw, L.stream());
}

// ---- local response normalisation -----------------------------------------------------------

void lrn_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k) {
  if (n * c * hw <= 0) return;
  Launch L(ctx);
  if (!lrn_on_cudnn(size, beta, k) || n * c * hw > INT_MAX) {
    cuda::lrn_forward(x, y, n, c, hw, size, alpha, beta, k, L.stream());
    return;
  }
  const LrnDesc lrn(size, alpha, beta, k);
  const TensorDesc d(n, c, hw, 1);
  MPLAN_CUDNN_CHECK(
      cudnnLRNCrossChannelForward(L.cudnn(), lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, d, x, &kZero, d, y));
}

void lrn_backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx, int64_t n, int64_t c,
                  int64_t hw, int64_t size, float alpha, float beta, float k, bool accumulate) {
  if (n * c * hw <= 0) return;
  Launch L(ctx);
  if (!lrn_on_cudnn(size, beta, k) || n * c * hw > INT_MAX) {
    cuda::lrn_backward(x, dy, dx, n, c, hw, size, alpha, beta, k, accumulate, L.stream());
    return;
  }
  const LrnDesc lrn(size, alpha, beta, k);
  const TensorDesc d(n, c, hw, 1);
  MPLAN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(L.cudnn(), lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, d, y, d, dy, d,
                                                 x, accumulate ? &kOne : &kZero, d, dx));
}

// ---- dropout, concat, loss, update -------------------------------------------------------------

void dropout_forward(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step) {
  Launch L(ctx);
  cuda::dropout_forward(x, y, mask, n, sample_elements, first_sample, p, seed, step, L.stream());
}

void dropout_backward(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate) {
  Launch L(ctx);
  cuda::dropout_backward(mask, dy, dx, count, p, accumulate, L.stream());
}

float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element) {
  return dropout_hash_uniform(seed, step, sample, element);
}

void concat_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t total_channels,
                    int64_t channel_offset, int64_t channels, int64_t hw) {
  Launch L(ctx);
  cuda::concat_forward(x, y, n, total_channels, channel_offset, channels, hw, L.stream());
}

void concat_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t total_channels,
                     int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate) {
  Launch L(ctx);
  cuda::concat_backward(dy, dx, n, total_channels, channel_offset, channels, hw, accumulate, L.stream());
}

namespace {
// Softmax over the classes of each sample: the instance mode of an (n, classes, 1, 1) tensor.
void softmax_rows(Launch& L, const float* logits, float* probs, int64_t n, int64_t classes) {
  if (n <= 0 || classes <= 0) return;
  const TensorDesc d(n, classes, 1, 1);
  MPLAN_CUDNN_CHECK(cudnnSoftmaxForward(L.cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, d,
                                        logits, &kZero, d, probs));
}
}  // namespace

void softmax_xent_forward(const Context& ctx, const float* logits, const int32_t* labels, float* probs, float* loss,
                          int64_t n, int64_t classes, float label_smoothing) {
  Launch L(ctx);
  softmax_rows(L, logits, probs, n, classes);
  cuda::softmax_xent_loss(logits, labels, loss, n, classes, label_smoothing, L.stream());
}

void softmax_xent_evaluate(const Context& ctx, const float* logits, const int32_t* labels, float* probs,
                           float* metrics, int64_t n, int64_t classes, float label_smoothing) {
  Launch L(ctx);
  softmax_rows(L, logits, probs, n, classes);
  cuda::softmax_xent_metrics(logits, labels, metrics, n, classes, label_smoothing, L.stream());
}

void softmax_xent_backward(const Context& ctx, const float* probs, const int32_t* labels, float* dlogits, int64_t n,
                           int64_t classes, float scale, bool accumulate, float label_smoothing) {
  Launch L(ctx);
  cuda::softmax_xent_grad(probs, labels, dlogits, n, classes, scale, accumulate, label_smoothing, L.stream());
}

void adamw_step(const Context& ctx, float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr,
                float beta1, float beta2, float eps, float weight_decay, uint64_t step) {
  Launch L(ctx);
  cuda::adamw_step(w, g, exp_avg, exp_avg_sq, count, lr, beta1, beta2, eps, weight_decay, step, L.stream());
}

void sgd_step(const Context& ctx, float* w, float* g, float* momentum_buf, int64_t count, float lr, float momentum,
              float weight_decay, bool first_step, bool nesterov) {
  Launch L(ctx);
  cuda::sgd_step(w, g, momentum_buf, count, lr, momentum, weight_decay, first_step, nesterov, L.stream());
}

}  // namespace mplan::rt

MPLAN_CUDNN_LEGACY_END
