// The CPU backend of runtime/ops.h: each op captures its arguments by value
// and runs the synchronous kernel (runtime/cpu/kernels.h) when its stream
// reaches it, as a CUDA kernel launch would.

#include <cstdio>
#include <iterator>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "runtime/check.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

using cpu::launch;

bool known_algorithm(ConvAlgoId algo) {
  return algo >= 0 && algo < static_cast<ConvAlgoId>(std::size(cpu::kConvAlgos));
}

// The algorithm that runs: the planned one when it supports the shape and its
// workspace fits, else direct (no workspace), said once per shape and direction.
cpu::ConvAlgo runnable(ConvDirection direction, const ConvShape& shape, ConvAlgoId planned, int64_t workspace_bytes) {
  if (known_algorithm(planned)) {
    const auto algo = static_cast<cpu::ConvAlgo>(planned);
    if (cpu::conv_algo_supported(algo, direction, shape) &&
        static_cast<int64_t>(cpu::conv_workspace_bytes(algo, direction, shape)) <= workspace_bytes)
      return algo;
  }
  static std::mutex mutex;
  static std::set<std::tuple<int, ConvAlgoId, int64_t, int64_t, int64_t, int64_t>> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.emplace(static_cast<int>(direction), planned, shape.n, shape.c, shape.k, shape.h).second)
    std::fprintf(stderr,
                 "mplan runtime: %s convolution (n=%lld c=%lld k=%lld %lldx%lld): algorithm %d does not run "
                 "this shape within %lld bytes of workspace; running direct instead\n",
                 cpu::conv_direction_name(direction), static_cast<long long>(shape.n),
                 static_cast<long long>(shape.c), static_cast<long long>(shape.k), static_cast<long long>(shape.r),
                 static_cast<long long>(shape.s), planned, static_cast<long long>(workspace_bytes));
  return cpu::ConvAlgo::direct;
}

std::vector<ConvMicroBatch> runnable_micro(ConvDirection direction, const ConvShape& shape, MicroBatches micro,
                                                int64_t workspace_bytes) {
  MPLAN_RT_CHECK(micro.items != nullptr && micro.count >= 1, "micro-batched convolution without micro-batches");
  std::vector<ConvMicroBatch> list(micro.items, micro.items + micro.count);
  for (ConvMicroBatch& m : list) {
    ConvShape slice = shape;
    slice.n = m.n;
    m.algo = static_cast<ConvAlgoId>(runnable(direction, slice, m.algo, workspace_bytes));
  }
  return list;
}

}  // namespace

// ---- convolution ---------------------------------------------------------------------------

int conv_algorithm_count(ConvDirection) { return static_cast<int>(std::size(cpu::kConvAlgos)); }

std::vector<ConvAlgoId> conv_algorithm_ids(ConvDirection direction) {
  std::vector<ConvAlgoId> ids;
  for (ConvAlgoId a = 0; a < conv_algorithm_count(direction); ++a) ids.push_back(a);
  return ids;
}

const char* conv_algorithm_name(ConvDirection, ConvAlgoId algo) {
  return known_algorithm(algo) ? cpu::conv_algo_name(static_cast<cpu::ConvAlgo>(algo)) : "unknown";
}

int64_t conv_workspace_bytes(const Context&, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo) {
  if (!known_algorithm(algo) || !shape.valid()) return -1;
  const auto a = static_cast<cpu::ConvAlgo>(algo);
  if (!cpu::conv_algo_supported(a, direction, shape)) return -1;
  return static_cast<int64_t>(cpu::conv_workspace_bytes(a, direction, shape));
}

void conv_forward(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x, const float* w,
                  const float* bias, float* y, void* workspace, int64_t workspace_bytes) {
  const cpu::ConvAlgo run = runnable(ConvDirection::forward, shape, algo, workspace_bytes);
  launch(ctx, [=] { cpu::conv_forward(run, shape, x, w, bias, y, workspace, workspace_bytes); });
}

void conv_backward_data(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* w, const float* dy,
                        float* dx, void* workspace, int64_t workspace_bytes, bool accumulate) {
  const cpu::ConvAlgo run = runnable(ConvDirection::backward_data, shape, algo, workspace_bytes);
  launch(ctx, [=] { cpu::conv_backward_data(run, shape, w, dy, dx, workspace, workspace_bytes, accumulate); });
}

void conv_backward_filter(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x,
                          const float* dy, float* dw, void* workspace, int64_t workspace_bytes) {
  const cpu::ConvAlgo run = runnable(ConvDirection::backward_filter, shape, algo, workspace_bytes);
  launch(ctx, [=] { cpu::conv_backward_filter(run, shape, x, dy, dw, workspace, workspace_bytes, true); });
}

void conv_backward_bias(const Context& ctx, const ConvShape& shape, const float* dy, float* dbias) {
  launch(ctx, [=] { cpu::conv_backward_bias(shape, dy, dbias, true); });
}

void conv_forward_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                        const float* w, const float* bias, float* y, void* workspace, int64_t workspace_bytes) {
  auto list = runnable_micro(ConvDirection::forward, shape, micro, workspace_bytes);
  launch(ctx, [=] {
    cpu::conv_forward_micro(shape, list.data(), static_cast<int>(list.size()), x, w, bias, y, workspace,
                            workspace_bytes);
  });
}

void conv_backward_data_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* w,
                              const float* dy, float* dx, void* workspace, int64_t workspace_bytes, bool accumulate) {
  auto list = runnable_micro(ConvDirection::backward_data, shape, micro, workspace_bytes);
  launch(ctx, [=] {
    cpu::conv_backward_data_micro(shape, list.data(), static_cast<int>(list.size()), w, dy, dx, workspace,
                                  workspace_bytes, accumulate);
  });
}

void conv_backward_filter_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                                const float* dy, float* dw, void* workspace, int64_t workspace_bytes) {
  auto list = runnable_micro(ConvDirection::backward_filter, shape, micro, workspace_bytes);
  launch(ctx, [=] {
    cpu::conv_backward_filter_micro(shape, list.data(), static_cast<int>(list.size()), x, dy, dw, workspace,
                                    workspace_bytes, true);
  });
}

// ---- linear -----------------------------------------------------------------------------

void linear_forward(const Context& ctx, const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t in, int64_t out) {
  launch(ctx, [=] { cpu::linear_forward(x, w, bias, y, n, in, out); });
}
void linear_backward_data(const Context& ctx, const float* w, const float* dy, float* dx, int64_t n, int64_t in,
                          int64_t out, bool accumulate) {
  launch(ctx, [=] { cpu::linear_backward_data(w, dy, dx, n, in, out, accumulate); });
}
void linear_backward_weights(const Context& ctx, const float* x, const float* dy, float* dw, int64_t n, int64_t in,
                             int64_t out) {
  launch(ctx, [=] { cpu::linear_backward_weights(x, dy, dw, n, in, out, true); });
}
void linear_backward_bias(const Context& ctx, const float* dy, float* dbias, int64_t n, int64_t out) {
  launch(ctx, [=] { cpu::linear_backward_bias(dy, dbias, n, out, true); });
}

// ---- element-wise ----------------------------------------------------------------------

void copy_or_add(const Context& ctx, const float* src, float* dst, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::copy_or_add(src, dst, count, accumulate); });
}
void add_two(const Context& ctx, const float* a, const float* b, float* y, int64_t count) {
  launch(ctx, [=] {
    const float* inputs[] = {a, b};
    cpu::add_forward(inputs, 2, y, count);
  });
}
void relu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::relu_forward(x, y, count); });
}
void relu_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::relu_backward(y, dy, dx, count, accumulate); });
}
void relu_forward_mask(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t count) {
  launch(ctx, [=] { cpu::relu_forward_mask(x, y, mask, count); });
}
void relu_backward_mask(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  launch(ctx, [=] { cpu::relu_backward_mask(mask, dy, dx, count, accumulate); });
}

// ---- pooling ---------------------------------------------------------------------------

void max_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y) {
  launch(ctx, [=] { cpu::max_pool_forward(shape, x, y); });
}
void max_pool_backward(const Context& ctx, const PoolShape& shape, const float* x, const float* y, const float* dy,
                       float* dx, bool accumulate) {
  launch(ctx, [=] { cpu::max_pool_backward(shape, x, y, dy, dx, accumulate); });
}
void max_pool_forward_indices(const Context& ctx, const PoolShape& shape, const float* x, float* y, uint8_t* index) {
  launch(ctx, [=] { cpu::max_pool_forward_indices(shape, x, y, index); });
}
void max_pool_backward_indices(const Context& ctx, const PoolShape& shape, const uint8_t* index, const float* dy,
                               float* dx, bool accumulate) {
  launch(ctx, [=] { cpu::max_pool_backward_indices(shape, index, dy, dx, accumulate); });
}
void avg_pool_forward(const Context& ctx, const PoolShape& shape, const float* x, float* y) {
  launch(ctx, [=] { cpu::avg_pool_forward(shape, x, y); });
}
void avg_pool_backward(const Context& ctx, const PoolShape& shape, const float* dy, float* dx, bool accumulate) {
  launch(ctx, [=] { cpu::avg_pool_backward(shape, dy, dx, accumulate); });
}
void global_avg_pool_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  launch(ctx, [=] { cpu::global_avg_pool_forward(x, y, n, c, hw); });
}
void global_avg_pool_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate) {
  launch(ctx, [=] { cpu::global_avg_pool_backward(dy, dx, n, c, hw, accumulate); });
}

// ---- batch normalisation ------------------------------------------------------------------

void batchnorm_forward_train(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                             float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             int64_t n, int64_t c, int64_t hw, float eps, float momentum) {
  launch(ctx, [=] {
    cpu::batchnorm_forward_train(x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps,
                                 momentum);
  });
}
void batchnorm_forward_saved(const Context& ctx, const float* x, const float* gamma, const float* beta,
                             const float* save_mean, const float* save_invstd, float* y, int64_t n, int64_t c,
                             int64_t hw) {
  launch(ctx, [=] { cpu::batchnorm_forward_saved(x, gamma, beta, save_mean, save_invstd, y, n, c, hw); });
}
void batchnorm_forward_inference(const Context& ctx, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y, int64_t n,
                                 int64_t c, int64_t hw, float eps) {
  launch(ctx, [=] { cpu::batchnorm_forward_inference(x, gamma, beta, running_mean, running_var, y, n, c, hw, eps); });
}
void batchnorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* save_mean,
                             const float* save_invstd, const float* dy, float* dx, float* workspace, int64_t n,
                             int64_t c, int64_t hw, bool accumulate) {
  // The per-channel sums that dx needs land in the workspace; dgamma and
  // dbeta are BP2's (batchnorm_backward_params).
  launch(ctx, [=] {
    cpu::batchnorm_backward(x, gamma, save_mean, save_invstd, dy, dx, workspace, workspace + c, n, c, hw, accumulate,
                            false);
  });
}
void batchnorm_backward_params(const Context& ctx, const float* x, const float* save_mean, const float* save_invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw) {
  launch(ctx, [=] { cpu::batchnorm_backward_params(x, save_mean, save_invstd, dy, dgamma, dbeta, n, c, hw, true); });
}

// ---- lrn, dropout, concat, loss, update ------------------------------------------------------

void lrn_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size,
                 float alpha, float beta, float k) {
  launch(ctx, [=] { cpu::lrn_forward(x, y, n, c, hw, size, alpha, beta, k); });
}
void lrn_backward(const Context& ctx, const float* x, const float*, const float* dy, float* dx, int64_t n, int64_t c,
                  int64_t hw, int64_t size, float alpha, float beta, float k, bool accumulate) {
  launch(ctx, [=] { cpu::lrn_backward(x, dy, dx, n, c, hw, size, alpha, beta, k, accumulate); });
}

void dropout_forward(const Context& ctx, const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step) {
  launch(ctx, [=] { cpu::dropout_forward(x, y, mask, n, sample_elements, first_sample, p, seed, step); });
}
void dropout_backward(const Context& ctx, const uint8_t* mask, const float* dy, float* dx, int64_t count, float p,
                      bool accumulate) {
  launch(ctx, [=] { cpu::dropout_backward(mask, dy, dx, count, p, accumulate); });
}
float dropout_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint64_t element) {
  return cpu::dropout_uniform(seed, step, sample, element);
}

void concat_forward(const Context& ctx, const float* x, float* y, int64_t n, int64_t total_channels,
                    int64_t channel_offset, int64_t channels, int64_t hw) {
  launch(ctx, [=] {
    for (int64_t b = 0; b < n; ++b)
      cpu::copy_or_add(x + b * channels * hw, y + (b * total_channels + channel_offset) * hw, channels * hw, false);
  });
}
void concat_backward(const Context& ctx, const float* dy, float* dx, int64_t n, int64_t total_channels,
                     int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate) {
  launch(ctx, [=] { cpu::concat_backward(dy, dx, n, total_channels, channel_offset, channels, hw, accumulate); });
}

void softmax_xent_forward(const Context& ctx, const float* logits, const int32_t* labels, float* probs, float* loss,
                          int64_t n, int64_t classes, float label_smoothing) {
  launch(ctx, [=] { cpu::softmax_xent_forward(logits, labels, probs, loss, n, classes, false, label_smoothing); });
}
void softmax_xent_evaluate(const Context& ctx, const float* logits, const int32_t* labels, float* probs,
                           float* metrics, int64_t n, int64_t classes, float label_smoothing) {
  launch(ctx, [=] { cpu::softmax_xent_evaluate(logits, labels, probs, metrics, n, classes, label_smoothing); });
}
void softmax_xent_backward(const Context& ctx, const float* probs, const int32_t* labels, float* dlogits, int64_t n,
                           int64_t classes, float scale, bool accumulate, float label_smoothing) {
  launch(ctx, [=] {
    cpu::softmax_xent_backward(probs, labels, dlogits, n, classes, scale, accumulate, label_smoothing);
  });
}
void adamw_step(const Context& ctx, float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr,
                float beta1, float beta2, float eps, float weight_decay, uint64_t step) {
  launch(ctx, [=] {
    cpu::adamw_step(w, g, exp_avg, exp_avg_sq, count, lr, beta1, beta2, eps, weight_decay, step);
    cpu::fill_f32(g, count, 0.0f);
  });
}
void sgd_step(const Context& ctx, float* w, float* g, float* momentum_buf, int64_t count, float lr, float momentum,
              float weight_decay, bool first_step, bool nesterov) {
  launch(ctx, [=] {
    cpu::sgd_step(w, g, momentum_buf, count, lr, momentum, weight_decay, first_step, nesterov);
    cpu::fill_f32(g, count, 0.0f);
  });
}

}  // namespace mplan::rt
