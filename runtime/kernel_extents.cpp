// kernel_extents: the vocabulary the extents of runtime/kernels.def are
// written in, the helpers of the kernel families that share a shape
// (convolution, pooling, attention, ...), and the table of every kernel's
// extents, expanded from kernels.def.

#include "runtime/kernel_extents.h"

#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>

#include "runtime/check.h"
#include "runtime/ops_casts.h"

namespace mplan::rt {
namespace {

constexpr int64_t kTooMany = kTooManyElements;

// a * b * ..., saturating at kTooMany (which no slot holds).
int64_t product(std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t f : factors) {
    if (f < 0) return kTooMany;
    if (__builtin_mul_overflow(result, f, &result)) return kTooMany;
  }
  return result;
}

// `v(i)`: the value of integer argument i of the call, a literal or a
// variable of the run.
class Values {
 public:
  Values(const std::vector<Arg>& args, const Bindings& bindings) : args_(args), bindings_(bindings) {}
  int64_t operator()(size_t i) const {
    const Arg& a = args_[i];
    if (a.kind != ArgKind::variable) return a.integer;
    switch (a.variable) {
      case Variable::first_sample: return bindings_.first_sample;
      case Variable::seed: return static_cast<int64_t>(bindings_.seed);
      case Variable::step: return static_cast<int64_t>(bindings_.step);
      case Variable::first_update: return bindings_.first_update ? 1 : 0;
      case Variable::lr: return 0;
    }
    return 0;
  }

 private:
  const std::vector<Arg>& args_;
  const Bindings& bindings_;
};

// `e`: what a kernels.def entry says about its call's operands.
class Operands {
 public:
  Operands(const KernelCall& call, const Values& v, OperandExtents& out) : call_(call), v_(v), out_(out) {
    out_.elements.assign(call.args.size(), -1);
    out_.optional.assign(call.args.size(), false);
  }
  const Arg& arg(size_t i) const { return call_.args[i]; }
  // Each of these integer arguments is a size: at least 0.
  void sizes(std::initializer_list<size_t> indices) {
    for (size_t i : indices)
      if (v_(i) < 0) out_.error = "argument " + std::to_string(i + 1) + " is a negative size";
  }
  // A size no kernel takes, in words ("a loss over no classes").
  void fail(const char* why) { out_.error = why; }
  bool failed() const { return !out_.error.empty(); }
  // Pointer parameter i touches `elements` elements: set({{i, elements}, ...}).
  void set(std::initializer_list<std::pair<size_t, int64_t>> items) {
    for (const auto& [index, elements] : items) out_.elements[index] = elements;
  }
  // Every pointer parameter touches `elements` (the element-wise kernels).
  void every(int64_t elements) {
    const std::vector<ParamType>& params = kernel_params(call_.kernel);
    for (size_t i = 0; i < params.size(); ++i)
      if (is_pointer(params[i])) out_.elements[i] = elements;
  }
  // These pointer parameters may be null (no bias, a gradient not wanted).
  void optional(std::initializer_list<size_t> indices) {
    for (size_t i : indices) out_.optional[i] = true;
  }
  // Whether argument i is the literal flag true; the literal real 0.
  bool flag(size_t i) const { return arg(i).kind == ArgKind::flag && arg(i).flag; }
  bool zero(size_t i) const { return arg(i).kind == ArgKind::real && arg(i).real == 0; }

 private:
  const KernelCall& call_;
  const Values& v_;
  OperandExtents& out_;
};

// ---- the families: sizes checked, extents by what each tensor is ----------------------------

// A convolution, its shape argument 0: x, w, y and the bias (k).
struct ConvExtents {
  int64_t x = 0, w = 0, y = 0, k = 0;
};
ConvExtents conv(Operands& e) {
  const ConvShape& s = e.arg(0).conv;
  for (int64_t field : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups,
                        s.dilation_h, s.dilation_w})
    if (field > (int64_t{1} << 30)) e.fail("a convolution size above 2^30");
  if (e.failed()) return {};
  return {product({s.n, s.c, s.h, s.w}), product({s.k, s.c / s.groups, s.r, s.s}), product({s.n, s.k, s.p(), s.q()}),
          s.k};
}

// Max or average pooling, its shape argument 0: x and y (p() and q() are PyTorch's output sizes).
struct PoolExtents {
  int64_t x = 0, y = 0;
};
PoolExtents pool(Operands& e) {
  const PoolShape& s = e.arg(0).pool;
  for (int64_t field : {s.n, s.c, s.h, s.w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w})
    if (field > (int64_t{1} << 30)) e.fail("a pooling size above 2^30");
  if (!e.failed() &&
      (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || s.kernel_h < 1 || s.kernel_w < 1 || s.stride_h < 1 ||
       s.stride_w < 1 || s.pad_h < 0 || s.pad_w < 0 || 2 * s.pad_h > s.kernel_h || 2 * s.pad_w > s.kernel_w ||
       s.h + 2 * s.pad_h < s.kernel_h || s.w + 2 * s.pad_w < s.kernel_w))
    e.fail("not a pooling shape (positive sizes, padding at most half the kernel as in PyTorch)");
  if (e.failed()) return {};
  return {product({s.n, s.c, s.h, s.w}), product({s.n, s.c, s.p(), s.q()})};
}

// The compact max pool: its places are bytes (runtime/types.h).
PoolExtents indexed_pool(Operands& e) {
  const PoolExtents s = pool(e);
  const PoolShape& shape = e.arg(0).pool;
  if (!e.failed() && shape.kernel_h * shape.kernel_w > kMaxIndexedPoolWindow)
    e.fail("an indexed max pool over a window of more than 255 elements");
  return s;
}

// Sizes n, c, hw at arguments at, at+1, at+2 (batch norm, LRN): all n*c*hw
// values and one per channel.
struct ChannelExtents {
  int64_t all = 0, c = 0;
};
ChannelExtents channels(Operands& e, const Values& v, size_t at) {
  e.sizes({at, at + 1, at + 2});
  return {product({v(at), v(at + 1), v(at + 2)}), v(at + 1)};
}

// Layer norm: outer, c, inner at arguments 6-8; all values, the c
// parameters, one statistic per position.
struct LayerNormExtents {
  int64_t all = 0, c = 0, positions = 0;
};
LayerNormExtents layernorm(Operands& e, const Values& v) {
  e.sizes({6, 7, 8});
  return {product({v(6), v(7), v(8)}), v(7), product({v(6), v(8)})};
}

// A channel range of a concat (n, total, offset, channels, hw at arguments
// 2-6): the part one input holds, the whole of y.
struct PartExtents {
  int64_t part = 0, whole = 0;
};
PartExtents concat(Operands& e, const Values& v) {
  e.sizes({2, 3, 4, 5, 6});
  if (v(4) > v(3) || v(5) > v(3) - v(4)) e.fail("a concat slice beyond its total channels");
  return {product({v(2), v(5), v(6)}), product({v(2), v(3), v(6)})};
}
// A column range of a slice (outer, x_cols, offset, y_cols at arguments 2-5).
PartExtents slice(Operands& e, const Values& v) {
  e.sizes({2, 3, 4, 5});
  if (v(4) > v(3) || v(5) > v(3) - v(4)) e.fail("a slice beyond its input's columns");
  return {product({v(2), v(5)}), product({v(2), v(3)})};
}

// Adaptive average pooling (planes, h, w, out_h, out_w at arguments 2-6): x and y.
PoolExtents adaptive_pool(Operands& e, const Values& v) {
  e.sizes({2, 3, 4, 5, 6});
  if (v(3) < 1 || v(4) < 1 || v(5) < 1 || v(6) < 1) e.fail("an adaptive pooling of an empty image");
  return {product({v(2), v(3), v(4)}), product({v(2), v(5), v(6)})};
}

// A per-channel multiply (n, c, inner, s_per_sample at arguments 3-6): all
// values, and the factors: one per sample and channel, or one per channel.
struct ChannelMulExtents {
  int64_t all = 0, factors = 0;
};
ChannelMulExtents channel_mul(Operands& e, const Values& v) {
  e.sizes({3, 4, 5});
  return {product({v(3), v(4), v(5)}), e.flag(6) ? product({v(3), v(4)}) : v(4)};
}

// A batched matmul (batch, m, k, n at arguments 3-6): a, b and y.
struct MatmulExtents {
  int64_t a = 0, b = 0, y = 0;
};
MatmulExtents matmul(Operands& e, const Values& v) {
  e.sizes({3, 4, 5, 6});
  return {product({v(3), v(4), v(5)}), product({v(3), v(5), v(6)}), product({v(3), v(4), v(6)})};
}

// Multi-head attention (n, heads, tq, tk, head_dim, q_stride, kv_stride from
// argument `at`). q reaches its last row's last head: rows q_stride apart,
// heads*head_dim floats in the last; k and v alike. probs: one tq x tk matrix
// per sample and head; y: (n, tq, heads*head_dim).
struct AttentionExtents {
  int64_t q = 0, kv = 0, probs = 0, y = 0;
};
int64_t rows_extent(int64_t rows, int64_t stride, int64_t width) {
  if (rows < 1) return 0;
  const int64_t before = product({rows - 1, stride});
  int64_t end = 0;
  return before == kTooMany || __builtin_add_overflow(before, width, &end) ? kTooMany : end;
}
AttentionExtents attention(Operands& e, const Values& v, size_t at) {
  e.sizes({at, at + 1, at + 2, at + 3, at + 4, at + 5, at + 6});
  const int64_t n = v(at), heads = v(at + 1), tq = v(at + 2), tk = v(at + 3), hd = v(at + 4);
  const int64_t q_stride = v(at + 5), kv_stride = v(at + 6);
  if (product({heads, hd}) > q_stride || product({heads, hd}) > kv_stride || tq < 1 || tk < 1 || heads < 1)
    e.fail("an attention whose heads do not fit its rows");
  if (e.failed()) return {};
  return {rows_extent(product({n, tq}), q_stride, product({heads, hd})),
          rows_extent(product({n, tk}), kv_stride, product({heads, hd})), product({n, heads, tq, tk}),
          product({n, tq, heads, hd})};
}

// A patch embedding (n, c, h, w, patch, out from argument `at`): x, the
// weights (out, c*patch*patch), the bias (out), y (tokens, out) and the
// unfolded patches in the workspace.
struct PatchExtents {
  int64_t x = 0, weights = 0, bias = 0, y = 0, patches = 0;
};
PatchExtents patch_embed(Operands& e, const Values& v, size_t at) {
  e.sizes({at, at + 1, at + 2, at + 3, at + 4, at + 5});
  const int64_t n = v(at), c = v(at + 1), h = v(at + 2), w = v(at + 3), patch = v(at + 4), out = v(at + 5);
  if (patch < 1 || patch > h || patch > w) e.fail("a patch larger than its image (or of no pixels)");
  if (e.failed()) return {};
  const int64_t rows = product({n, h / patch, w / patch}), row = product({c, patch, patch});
  return {product({n, c, h, w}), product({out, row}), out, product({rows, out}), product({rows, row})};
}

// A class token (n, tokens, dim from argument `at`): x, the token and y with one more token.
struct ClassTokenExtents {
  int64_t x = 0, token = 0, y = 0;
};
ClassTokenExtents class_token(Operands& e, const Values& v, size_t at) {
  e.sizes({at, at + 1, at + 2});
  if (v(at + 1) > (int64_t{1} << 40)) e.fail("a sequence of more than 2^40 tokens");
  if (e.failed()) return {};
  return {product({v(at), v(at + 1), v(at + 2)}), v(at + 2), product({v(at), v(at + 1) + 1, v(at + 2)})};
}

// The casts of 16-bit programs (runtime/ops_casts.h): whether a type argument
// is a storage type, and the bytes of one of its elements.
bool storage_type(int64_t type) { return type >= 0 && type < kStorageTypeCount; }
int64_t storage_type_bytes(int64_t type) { return storage_type(type) ? storage_bytes(type) : kTooMany; }

// The 16-bit kernels (runtime/ops_sixteen_bit.h): their type argument is
// bfloat16 or float16, and their extents are bytes, two per element.
void sixteen_bit_type(Operands& e, int64_t type) {
  if (type != static_cast<int64_t>(StorageType::bfloat16) && type != static_cast<int64_t>(StorageType::float16))
    e.fail("a 16-bit kernel's type that is neither bfloat16 (1) nor float16 (2)");
}
int64_t halves(int64_t elements) { return product({elements, 2}); }

// ---- the table --------------------------------------------------------------------------------

using Describe = void (*)(Operands& e, const Values& v);

constexpr Describe kDescriptions[] = {
#define MPLAN_KERNEL(name, ...) []([[maybe_unused]] Operands& e, [[maybe_unused]] const Values& v) { __VA_ARGS__; },
#include "runtime/kernels.def"
#undef MPLAN_KERNEL
};
static_assert(std::size(kDescriptions) == kKernelCount);

}  // namespace

OperandExtents kernel_extents(const KernelCall& call, const Bindings& bindings) {
  const int index = static_cast<int>(call.kernel);
  MPLAN_RT_CHECK(index >= 0 && index < kKernelCount, "kernel id out of range");
  OperandExtents out;
  const Values v(call.args, bindings);
  Operands e(call, v, out);
  kDescriptions[index](e, v);
  return out;
}

}  // namespace mplan::rt
