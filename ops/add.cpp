// add: the element-wise sum of two or more inputs of one shape (residual
// joins). Its backward needs nothing from the forward pass: every input's
// gradient is dY.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) {
  const Shape& first = in.shapes[0];
  for (size_t k = 1; k < in.shapes.size(); ++k)
    if (in.shapes[k] != first)
      return failure(fmt::format("add needs inputs of the same shape, but {} is {} and {} is {}",
                                 describe_input(in, 0), first.to_string(), describe_input(in, k),
                                 in.shapes[k].to_string()));
  return {first, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  double all_inputs = 0;
  for (const Shape& in : task.inputs) all_inputs += elements(in, b) * task.element_bytes;
  // FP: read all, write Y; BP the reverse.
  return {streaming(all_inputs + elements(task.output, b) * task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const rt::Arg count = integer(ctx.samples * task.output.elements());
  if (task.kind == TaskKind::FP) {
    // Y = X0 + X1 in one pass, then += each further input (the CPU's add_forward order).
    out.call(rt::Kernel::add_two, {out.tensor(TensorRole::input, 0), out.tensor(TensorRole::input, 1),
                                   out.tensor(TensorRole::output), count});
    for (size_t k = 2; k < task.inputs.size(); ++k)
      out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::input, static_cast<int>(k)),
                                         out.tensor(TensorRole::output), count, flag(true)});
  } else if (task.kind == TaskKind::BP1) {
    for_each_input_gradient(task, ctx, [&](int k, bool accumulate) {
      out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, k),
                                         count, flag(accumulate)});
    });
  }
}

}  // namespace

extern const OpSpec add_spec = {
    .op = Op::add,
    .name = "add",
    .min_inputs = 2,
    .max_inputs = -1,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .bp1_in_place = true,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
