// mul: the element-wise product of two inputs, either of one shape or one of
// them [C, 1, ..., 1] against the other's [C, ...] (a factor per channel,
// squeeze-and-excitation's x * scale, in either order). Backward needs both
// inputs: dX = dY * S, dS = the per-channel sum of dY * X.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

// Whether `s` is `x`'s shape with every dimension after the first 1.
bool is_channel_factor(const Shape& s, const Shape& x) {
  if (s.dims.size() != x.dims.size() || s.dims.empty() || s.dims[0] != x.dims[0]) return false;
  for (size_t d = 1; d < s.dims.size(); ++d)
    if (s.dims[d] != 1) return false;
  return true;
}

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) {
  const Shape& a = in.shapes[0];
  const Shape& b = in.shapes[1];
  if (a == b || is_channel_factor(b, a)) return {a, {}};
  if (is_channel_factor(a, b)) return {b, {}};
  return failure(fmt::format(
      "mul needs inputs of one shape, or one of them [C, 1, ...] against the other's [C, ...], but {} is {} and {} "
      "is {}",
      describe_input(in, 0), a.to_string(), describe_input(in, 1), b.to_string()));
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

// Which input is the full tensor X (the other is the factor S), and the
// kernels' view (c, inner) of X: per channel, or element by element.
struct Operands {
  int full = 0;
  int64_t c = 1, inner = 1;
};
Operands operands_of(const OpTask& task) {
  const Shape& a = task.inputs.at(0);
  const Shape& b = task.inputs.at(1);
  Operands o;
  if (a == b) {
    o.c = a.elements();  // every element its own factor
    return o;
  }
  o.full = is_channel_factor(b, a) ? 0 : 1;
  auto [c, inner] = channels_and_hw(task.inputs.at(o.full));
  o.c = c;
  o.inner = inner;
  return o;
}

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {streaming(2 * y, 1, y / task.element_bytes)};
  return {streaming(3 * y), streaming(2 * y, 1, y / task.element_bytes)};  // dX = dY * S; dS = sum(dY * X)
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Operands o = operands_of(task);
  const int factor = 1 - o.full;
  const std::vector<rt::Arg> sizes{integer(ctx.samples), integer(o.c), integer(o.inner), flag(true)};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::channel_mul_forward,
             with_sizes({out.tensor(TensorRole::input, o.full), out.tensor(TensorRole::input, factor),
                         out.tensor(TensorRole::output)}));
  } else if (task.kind == TaskKind::BP1) {
    for_each_input_gradient(task, ctx, [&](int k, bool accumulate) {
      std::vector<rt::Arg> args =
          k == o.full ? with_sizes({out.tensor(TensorRole::input, factor), out.tensor(TensorRole::gradient),
                                    out.tensor(TensorRole::input_gradient, k)})
                      : with_sizes({out.tensor(TensorRole::input, o.full), out.tensor(TensorRole::gradient),
                                    out.tensor(TensorRole::input_gradient, k)});
      args.push_back(flag(accumulate));
      out.call(k == o.full ? rt::Kernel::channel_mul_backward_x : rt::Kernel::channel_mul_backward_s,
               std::move(args));
    });
  }
}

}  // namespace

extern const OpSpec mul_spec = {
    .op = Op::mul,
    .name = "mul",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
