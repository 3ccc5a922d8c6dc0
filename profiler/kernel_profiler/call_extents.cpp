// The elements each kernel of runtime/kernels.def reads or writes through
// each pointer parameter, from its size arguments (runtime/ops.h gives the
// shapes), and the check of a call's tensors against its job's slots.

#include "profiler/kernel_profiler/call_extents.h"

#include <limits>

namespace mplan::kernel_profiler {
namespace {

using rt::Arg;
using rt::ArgKind;
using rt::Kernel;

constexpr int64_t kTooMany = std::numeric_limits<int64_t>::max();

// a * b * ..., saturating at kTooMany (which no slot holds).
int64_t product(std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t f : factors) {
    if (f < 0) return kTooMany;
    if (__builtin_mul_overflow(result, f, &result)) return kTooMany;
  }
  return result;
}

struct Extents {
  std::vector<int64_t> elements;  // per parameter; -1: not a pointer
  std::vector<bool> optional;     // per parameter: may be a null pointer
  std::string error;              // a size no kernel takes
};

std::string describe(int64_t value) {
  std::string digits = std::to_string(value), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') text += ',';
    text += digits[i];
  }
  return text;
}

Extents extents_of(const rt::KernelCall& call, const rt::Bindings& b) {
  const std::vector<Arg>& a = call.args;
  Extents e;
  e.elements.assign(a.size(), -1);
  e.optional.assign(a.size(), false);
  // The value of integer argument i (a literal or a variable of the run).
  auto v = [&](size_t i) -> int64_t {
    if (a[i].kind != ArgKind::variable) return a[i].integer;
    switch (a[i].variable) {
      case rt::Variable::first_sample: return b.first_sample;
      case rt::Variable::seed: return static_cast<int64_t>(b.seed);
      case rt::Variable::step: return static_cast<int64_t>(b.step);
      case rt::Variable::first_update: return b.first_update ? 1 : 0;
      case rt::Variable::lr: return 0;
    }
    return 0;
  };
  auto sizes_nonnegative = [&](std::initializer_list<size_t> indices) {
    for (size_t i : indices)
      if (v(i) < 0) e.error = "argument " + std::to_string(i + 1) + " is a negative size";
  };
  auto set = [&](std::initializer_list<std::pair<size_t, int64_t>> items) {
    for (const auto& [index, count] : items) e.elements[index] = count;
  };
  // Convolutions: the shape is argument 0; x, w, y and the bias per the shape.
  auto conv = [&](int64_t* x, int64_t* w, int64_t* y, int64_t* k) {
    const rt::ConvShape& s = a[0].conv;
    for (int64_t field : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups,
                          s.dilation_h, s.dilation_w})
      if (field > (int64_t{1} << 30)) e.error = "a convolution size above 2^30";
    if (!e.error.empty()) return;
    *x = product({s.n, s.c, s.h, s.w});
    *w = product({s.k, s.c / s.groups, s.r, s.s});
    *y = product({s.n, s.k, s.p(), s.q()});
    *k = s.k;
  };
  // Pooling: the shape is argument 0; p() and q() are PyTorch's output sizes.
  auto pool = [&](int64_t* in, int64_t* out) {
    const rt::PoolShape& s = a[0].pool;
    for (int64_t field : {s.n, s.c, s.h, s.w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w})
      if (field > (int64_t{1} << 30)) e.error = "a pooling size above 2^30";
    if (e.error.empty() &&
        (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || s.kernel_h < 1 || s.kernel_w < 1 || s.stride_h < 1 ||
         s.stride_w < 1 || s.pad_h < 0 || s.pad_w < 0 || 2 * s.pad_h > s.kernel_h || 2 * s.pad_w > s.kernel_w ||
         s.h + 2 * s.pad_h < s.kernel_h || s.w + 2 * s.pad_w < s.kernel_w))
      e.error = "not a pooling shape (positive sizes, padding at most half the kernel as in PyTorch)";
    if (!e.error.empty()) return;
    *in = product({s.n, s.c, s.h, s.w});
    *out = product({s.n, s.c, s.p(), s.q()});
  };
  int64_t x = 0, w = 0, y = 0, k = 0;
  switch (call.kernel) {
    case Kernel::conv_forward:
    case Kernel::conv_forward_micro:  // shape, algo|micro, x, w, bias, y, workspace, workspace_bytes
      conv(&x, &w, &y, &k);
      sizes_nonnegative({7});
      set({{2, x}, {3, w}, {4, k}, {5, y}, {6, v(7)}});
      e.optional[4] = true;
      break;
    case Kernel::conv_backward_data:
    case Kernel::conv_backward_data_micro:  // shape, algo|micro, w, dy, dx, workspace, workspace_bytes, accumulate
      conv(&x, &w, &y, &k);
      sizes_nonnegative({6});
      set({{2, w}, {3, y}, {4, x}, {5, v(6)}});
      break;
    case Kernel::conv_backward_filter:
    case Kernel::conv_backward_filter_micro:  // shape, algo|micro, x, dy, dw, workspace, workspace_bytes
      conv(&x, &w, &y, &k);
      sizes_nonnegative({6});
      set({{2, x}, {3, y}, {4, w}, {5, v(6)}});
      break;
    case Kernel::conv_backward_bias:  // shape, dy, dbias
      conv(&x, &w, &y, &k);
      set({{1, y}, {2, k}});
      break;
    case Kernel::linear_forward:  // x, w, bias, y, n, in, out
      sizes_nonnegative({4, 5, 6});
      set({{0, product({v(4), v(5)})}, {1, product({v(6), v(5)})}, {2, v(6)}, {3, product({v(4), v(6)})}});
      e.optional[2] = true;
      break;
    case Kernel::linear_backward_data:  // w, dy, dx, n, in, out, accumulate
      sizes_nonnegative({3, 4, 5});
      set({{0, product({v(5), v(4)})}, {1, product({v(3), v(5)})}, {2, product({v(3), v(4)})}});
      break;
    case Kernel::linear_backward_weights:  // x, dy, dw, n, in, out
      sizes_nonnegative({3, 4, 5});
      set({{0, product({v(3), v(4)})}, {1, product({v(3), v(5)})}, {2, product({v(5), v(4)})}});
      break;
    case Kernel::linear_backward_bias:  // dy, dbias, n, out
      sizes_nonnegative({2, 3});
      set({{0, product({v(2), v(3)})}, {1, v(3)}});
      break;
    case Kernel::copy_or_add:   // src, dst, count, accumulate
    case Kernel::relu_forward:  // x, y, count
      sizes_nonnegative({2});
      set({{0, v(2)}, {1, v(2)}});
      break;
    case Kernel::add_two:  // a, b, y, count
      sizes_nonnegative({3});
      set({{0, v(3)}, {1, v(3)}, {2, v(3)}});
      break;
    case Kernel::relu_backward:  // y, dy, dx, count, accumulate
      sizes_nonnegative({3});
      set({{0, v(3)}, {1, v(3)}, {2, v(3)}});
      break;
    case Kernel::max_pool_forward:
    case Kernel::avg_pool_forward:  // shape, x, y
      pool(&x, &y);
      set({{1, x}, {2, y}});
      break;
    case Kernel::max_pool_backward:  // shape, x, y, dy, dx, accumulate
      pool(&x, &y);
      set({{1, x}, {2, y}, {3, y}, {4, x}});
      break;
    case Kernel::avg_pool_backward:  // shape, dy, dx, accumulate
      pool(&x, &y);
      set({{1, y}, {2, x}});
      break;
    case Kernel::global_avg_pool_forward:  // x, y, n, c, hw
      sizes_nonnegative({2, 3, 4});
      set({{0, product({v(2), v(3), v(4)})}, {1, product({v(2), v(3)})}});
      break;
    case Kernel::global_avg_pool_backward:  // dy, dx, n, c, hw, accumulate
      sizes_nonnegative({2, 3, 4});
      set({{0, product({v(2), v(3)})}, {1, product({v(2), v(3), v(4)})}});
      break;
    case Kernel::batchnorm_forward_train: {  // x, gamma, beta, y, mean, invstd, running mean, var, n, c, hw, ...
      sizes_nonnegative({8, 9, 10});
      const int64_t all = product({v(8), v(9), v(10)}), c = v(9);
      set({{0, all}, {1, c}, {2, c}, {3, all}, {4, c}, {5, c}, {6, c}, {7, c}});
      break;
    }
    case Kernel::batchnorm_forward_saved: {  // x, gamma, beta, mean, invstd, y, n, c, hw
      sizes_nonnegative({6, 7, 8});
      const int64_t all = product({v(6), v(7), v(8)}), c = v(7);
      set({{0, all}, {1, c}, {2, c}, {3, c}, {4, c}, {5, all}});
      break;
    }
    case Kernel::batchnorm_backward_data: {  // x, gamma, mean, invstd, dy, dx, workspace, n, c, hw, accumulate
      sizes_nonnegative({7, 8, 9});
      const int64_t all = product({v(7), v(8), v(9)}), c = v(8);
      set({{0, all}, {1, c}, {2, c}, {3, c}, {4, all}, {5, all}, {6, product({2, c})}});
      break;
    }
    case Kernel::batchnorm_backward_params: {  // x, mean, invstd, dy, dgamma, dbeta, n, c, hw
      sizes_nonnegative({6, 7, 8});
      const int64_t all = product({v(6), v(7), v(8)}), c = v(7);
      set({{0, all}, {1, c}, {2, c}, {3, all}, {4, c}, {5, c}});
      break;
    }
    case Kernel::lrn_forward: {  // x, y, n, c, hw, size, alpha, beta, k
      sizes_nonnegative({2, 3, 4});
      if (v(5) < 1) e.error = "an LRN window of fewer than one channel";
      const int64_t all = product({v(2), v(3), v(4)});
      set({{0, all}, {1, all}});
      break;
    }
    case Kernel::lrn_backward: {  // x, y, dy, dx, n, c, hw, size, alpha, beta, k, accumulate
      sizes_nonnegative({4, 5, 6});
      if (v(7) < 1) e.error = "an LRN window of fewer than one channel";
      const int64_t all = product({v(4), v(5), v(6)});
      set({{0, all}, {1, all}, {2, all}, {3, all}});
      break;
    }
    case Kernel::dropout_forward: {  // x, y, mask, n, sample_elements, first_sample, p, seed, step
      sizes_nonnegative({3, 4, 5});
      const int64_t all = product({v(3), v(4)});
      set({{0, all}, {1, all}, {2, all}});
      break;
    }
    case Kernel::dropout_backward:  // mask, dy, dx, count, p, accumulate
      sizes_nonnegative({3});
      set({{0, v(3)}, {1, v(3)}, {2, v(3)}});
      break;
    case Kernel::concat_forward:     // x, y, n, total, offset, channels, hw
    case Kernel::concat_backward: {  // dy, dx, n, total, offset, channels, hw, accumulate
      sizes_nonnegative({2, 3, 4, 5, 6});
      if (v(4) > v(3) || v(5) > v(3) - v(4)) e.error = "a concat slice beyond its total channels";
      const int64_t part = product({v(2), v(5), v(6)}), whole = product({v(2), v(3), v(6)});
      if (call.kernel == Kernel::concat_forward)
        set({{0, part}, {1, whole}});
      else
        set({{0, whole}, {1, part}});
      break;
    }
    case Kernel::softmax_xent_forward:  // logits, labels, probs, loss, n, classes
      sizes_nonnegative({4, 5});
      if (v(5) < 1) e.error = "a loss over no classes";
      set({{0, product({v(4), v(5)})}, {1, v(4)}, {2, product({v(4), v(5)})}, {3, 1}});
      break;
    case Kernel::softmax_xent_backward:  // probs, labels, dlogits, n, classes, scale, accumulate
      sizes_nonnegative({3, 4});
      set({{0, product({v(3), v(4)})}, {1, v(3)}, {2, product({v(3), v(4)})}});
      break;
    // ---- the vision-model ops (runtime/ops_vision.h) ----
    case Kernel::hardswish_forward:
    case Kernel::hardsigmoid_forward:
    case Kernel::silu_forward:
    case Kernel::sigmoid_forward:
    case Kernel::gelu_forward:
    case Kernel::clip_forward:  // x, y, count, ...
      sizes_nonnegative({2});
      set({{0, v(2)}, {1, v(2)}});
      break;
    case Kernel::hardswish_backward:
    case Kernel::hardsigmoid_backward:
    case Kernel::silu_backward:
    case Kernel::sigmoid_backward:
    case Kernel::gelu_backward:
    case Kernel::clip_backward:  // x or y, dy, dx, count, ...
      sizes_nonnegative({3});
      set({{0, v(3)}, {1, v(3)}, {2, v(3)}});
      break;
    case Kernel::channel_mul_forward:       // x, s, y, n, c, inner, per_sample
    case Kernel::channel_mul_backward_x:    // s, dy, dx, n, c, inner, per_sample, accumulate
    case Kernel::channel_mul_backward_s: {  // x, dy, ds, n, c, inner, per_sample, accumulate
      sizes_nonnegative({3, 4, 5});
      const int64_t all = product({v(3), v(4), v(5)});
      const int64_t factors = a[6].kind == ArgKind::flag && a[6].flag ? product({v(3), v(4)}) : v(4);
      if (call.kernel == Kernel::channel_mul_forward)
        set({{0, all}, {1, factors}, {2, all}});
      else if (call.kernel == Kernel::channel_mul_backward_x)
        set({{0, factors}, {1, all}, {2, all}});
      else
        set({{0, all}, {1, all}, {2, factors}});
      break;
    }
    case Kernel::adaptive_avg_pool_forward:     // x, y, planes, h, w, out_h, out_w
    case Kernel::adaptive_avg_pool_backward: {  // dy, dx, planes, h, w, out_h, out_w, accumulate
      sizes_nonnegative({2, 3, 4, 5, 6});
      if (v(3) < 1 || v(4) < 1 || v(5) < 1 || v(6) < 1) e.error = "an adaptive pooling of an empty image";
      const int64_t in = product({v(2), v(3), v(4)}), out = product({v(2), v(5), v(6)});
      if (call.kernel == Kernel::adaptive_avg_pool_forward)
        set({{0, in}, {1, out}});
      else
        set({{0, out}, {1, in}});
      break;
    }
    case Kernel::channel_shuffle: {  // x, y, n, c, inner, groups, accumulate
      sizes_nonnegative({2, 3, 4});
      if (v(5) < 1 || v(3) % v(5) != 0) e.error = "a channel shuffle whose groups do not divide its channels";
      const int64_t all = product({v(2), v(3), v(4)});
      set({{0, all}, {1, all}});
      break;
    }
    case Kernel::slice_forward:     // x, y, outer, x_cols, offset, y_cols
    case Kernel::slice_backward: {  // dy, dx, outer, x_cols, offset, y_cols, accumulate
      sizes_nonnegative({2, 3, 4, 5});
      if (v(4) > v(3) || v(5) > v(3) - v(4)) e.error = "a slice beyond its input's columns";
      const int64_t whole = product({v(2), v(3)}), part = product({v(2), v(5)});
      if (call.kernel == Kernel::slice_forward)
        set({{0, whole}, {1, part}});
      else
        set({{0, part}, {1, whole}});
      break;
    }
    case Kernel::layernorm_forward: {  // x, gamma, beta, y, mean, invstd, outer, c, inner, eps
      sizes_nonnegative({6, 7, 8});
      const int64_t all = product({v(6), v(7), v(8)}), positions = product({v(6), v(8)});
      set({{0, all}, {1, v(7)}, {2, v(7)}, {3, all}, {4, positions}, {5, positions}});
      break;
    }
    case Kernel::layernorm_backward_data: {  // x, gamma, mean, invstd, dy, dx, outer, c, inner, accumulate
      sizes_nonnegative({6, 7, 8});
      const int64_t all = product({v(6), v(7), v(8)}), positions = product({v(6), v(8)});
      set({{0, all}, {1, v(7)}, {2, positions}, {3, positions}, {4, all}, {5, all}});
      break;
    }
    case Kernel::layernorm_backward_params: {  // x, mean, invstd, dy, dgamma, dbeta, outer, c, inner
      sizes_nonnegative({6, 7, 8});
      const int64_t all = product({v(6), v(7), v(8)}), positions = product({v(6), v(8)});
      set({{0, all}, {1, positions}, {2, positions}, {3, all}, {4, v(7)}, {5, v(7)}});
      break;
    }
    case Kernel::matmul_forward:       // a, b, y, batch, m, k, n, transpose_b
    case Kernel::matmul_backward_a:    // b, dy, da, batch, m, k, n, transpose_b, accumulate
    case Kernel::matmul_backward_b: {  // a, dy, db, batch, m, k, n, transpose_b, accumulate
      sizes_nonnegative({3, 4, 5, 6});
      const int64_t am = product({v(3), v(4), v(5)}), bm = product({v(3), v(5), v(6)}),
                    ym = product({v(3), v(4), v(6)});
      if (call.kernel == Kernel::matmul_forward)
        set({{0, am}, {1, bm}, {2, ym}});
      else if (call.kernel == Kernel::matmul_backward_a)
        set({{0, bm}, {1, ym}, {2, am}});
      else
        set({{0, am}, {1, ym}, {2, bm}});
      break;
    }
    case Kernel::softmax_forward:  // x, y, rows, cols
      sizes_nonnegative({2, 3});
      if (v(3) < 1) e.error = "a softmax over rows of no elements";
      set({{0, product({v(2), v(3)})}, {1, product({v(2), v(3)})}});
      break;
    case Kernel::softmax_backward:  // y, dy, dx, rows, cols, accumulate
      sizes_nonnegative({3, 4});
      set({{0, product({v(3), v(4)})}, {1, product({v(3), v(4)})}, {2, product({v(3), v(4)})}});
      break;
    case Kernel::attention_forward:     // q, k, v, probs, y, n, heads, tq, tk, hd, q_stride, kv_stride, scale
    case Kernel::attention_backward: {  // q, k, v, probs, dy, dq, dk, dv, scratch, n, heads, tq, tk, hd, qs, kvs, ...
      const size_t at = call.kernel == Kernel::attention_forward ? 5 : 9;  // n
      sizes_nonnegative({at, at + 1, at + 2, at + 3, at + 4, at + 5, at + 6});
      const int64_t n = v(at), heads = v(at + 1), tq = v(at + 2), tk = v(at + 3), hd = v(at + 4);
      const int64_t q_stride = v(at + 5), kv_stride = v(at + 6);
      if (product({heads, hd}) > q_stride || product({heads, hd}) > kv_stride || tq < 1 || tk < 1 || heads < 1)
        e.error = "an attention whose heads do not fit its rows";
      if (!e.error.empty()) break;
      // A tensor reaches its last row's last head: rows stride apart, heads*hd floats in the last.
      auto rows_extent = [](int64_t rows, int64_t stride, int64_t width) {
        if (rows < 1) return int64_t{0};
        const int64_t before = product({rows - 1, stride});
        int64_t end = 0;
        return before == kTooMany || __builtin_add_overflow(before, width, &end) ? kTooMany : end;
      };
      const int64_t q_extent = rows_extent(product({n, tq}), q_stride, product({heads, hd}));
      const int64_t kv_extent = rows_extent(product({n, tk}), kv_stride, product({heads, hd}));
      const int64_t matrix = product({n, heads, tq, tk}), y = product({n, tq, heads, hd});
      if (call.kernel == Kernel::attention_forward) {
        set({{0, q_extent}, {1, kv_extent}, {2, kv_extent}, {3, matrix}, {4, y}});
      } else {
        set({{0, q_extent}, {1, kv_extent}, {2, kv_extent}, {3, matrix}, {4, y}, {5, q_extent}, {6, kv_extent},
             {7, kv_extent}, {8, matrix}});
        e.optional[5] = e.optional[6] = e.optional[7] = true;
      }
      break;
    }
    case Kernel::patch_embed_forward:          // x, w, bias, y, workspace, n, c, h, w, patch, out
    case Kernel::patch_embed_backward_data:    // w, dy, dx, workspace, n, c, h, w, patch, out, accumulate
    case Kernel::patch_embed_backward_params: {  // x, dy, dw, dbias, workspace, n, c, h, w, patch, out
      const size_t at = call.kernel == Kernel::patch_embed_backward_data ? 4 : 5;  // n
      sizes_nonnegative({at, at + 1, at + 2, at + 3, at + 4, at + 5});
      const int64_t n = v(at), c = v(at + 1), h = v(at + 2), w = v(at + 3), patch = v(at + 4), out = v(at + 5);
      if (patch < 1 || patch > h || patch > w) e.error = "a patch larger than its image (or of no pixels)";
      if (!e.error.empty()) break;
      const int64_t rows = product({n, h / patch, w / patch}), row = product({c, patch, patch});
      const int64_t x = product({n, c, h, w}), weights = product({out, row}), y = product({rows, out}),
                    patches = product({rows, row});
      if (call.kernel == Kernel::patch_embed_forward) {
        set({{0, x}, {1, weights}, {2, out}, {3, y}, {4, patches}});
        e.optional[2] = true;
      } else if (call.kernel == Kernel::patch_embed_backward_data) {
        set({{0, weights}, {1, y}, {2, x}, {3, patches}});
      } else {
        set({{0, x}, {1, y}, {2, weights}, {3, out}, {4, patches}});
        e.optional[3] = true;
      }
      break;
    }
    case Kernel::class_token_forward:         // x, token, y, n, tokens, dim
    case Kernel::class_token_backward_data:   // dy, dx, n, tokens, dim, accumulate
    case Kernel::class_token_backward_param: {  // dy, dtoken, n, tokens, dim
      const size_t at = call.kernel == Kernel::class_token_forward ? 3 : 2;
      sizes_nonnegative({at, at + 1, at + 2});
      if (v(at + 1) > (int64_t{1} << 40)) e.error = "a sequence of more than 2^40 tokens";
      if (!e.error.empty()) break;
      const int64_t x = product({v(at), v(at + 1), v(at + 2)}), y = product({v(at), v(at + 1) + 1, v(at + 2)});
      if (call.kernel == Kernel::class_token_forward)
        set({{0, x}, {1, v(at + 2)}, {2, y}});
      else if (call.kernel == Kernel::class_token_backward_data)
        set({{0, y}, {1, x}});
      else
        set({{0, y}, {1, v(at + 2)}});
      break;
    }
    case Kernel::pos_embed_forward:  // x, p, y, n, count
      sizes_nonnegative({3, 4});
      set({{0, product({v(3), v(4)})}, {1, v(4)}, {2, product({v(3), v(4)})}});
      break;
    case Kernel::pos_embed_backward_param:  // dy, dp, n, count
      sizes_nonnegative({2, 3});
      set({{0, product({v(2), v(3)})}, {1, v(3)}});
      break;
    case Kernel::sgd_step:  // w, g, momentum_buf, count, lr, momentum, weight_decay, first_step
      sizes_nonnegative({3});
      set({{0, v(3)}, {1, v(3)}, {2, a[5].kind == ArgKind::real && a[5].real == 0 ? 0 : v(3)}});
      break;
  }
  return e;
}

}  // namespace

std::string check_call_extents(const rt::KernelCall& call, const std::vector<int64_t>& slot_bytes,
                               const rt::Bindings& bindings) {
  const Extents e = extents_of(call, bindings);
  const std::string kernel = rt::kernel_name(call.kernel);
  if (!e.error.empty()) return kernel + ": " + e.error;
  const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
  for (size_t i = 0; i < call.args.size(); ++i) {
    const Arg& a = call.args[i];
    if (e.elements[i] < 0) continue;  // not a pointer
    const std::string which = "argument " + std::to_string(i + 1) + " of " + kernel;
    if (a.kind == ArgKind::null_pointer) {
      if (e.elements[i] == 0 || e.optional[i]) continue;
      return which + " is a null pointer where the kernel reads or writes " + describe(e.elements[i]) + " elements";
    }
    int64_t end = 0, bytes = 0;
    if (e.elements[i] == kTooMany || __builtin_add_overflow(a.offset_elements, e.elements[i], &end) ||
        __builtin_mul_overflow(end, rt::element_bytes(params[i]), &bytes))
      return which + " spans more than 2^63 bytes";
    const int64_t have = slot_bytes.at(static_cast<size_t>(a.slot));
    if (bytes > have)
      return which + " spans " + describe(bytes) + " bytes of slot " + std::to_string(a.slot) + " (offset " +
             describe(a.offset_elements) + " elements); the slot has " + describe(have);
  }
  return "";
}

}  // namespace mplan::kernel_profiler
