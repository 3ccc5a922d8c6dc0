// softmax: softmax over the last axis of the per-sample shape (PyTorch's
// Softmax(dim=-1)); not the loss (softmax_xent). Backward needs only Y:
// dX = Y * (dY - sum(dY * Y)) per row.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.output = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {streaming(3 * y, 1, 4 * y / task.element_bytes)};  // max, exp and sum, scale
  return {streaming(4 * y, 1, 3 * y / task.element_bytes)};                                 // dot, then dX
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t cols = task.output.dims.back();
  const int64_t rows = ctx.samples * (task.output.elements() / cols);
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::softmax_forward,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::output), integer(rows), integer(cols)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::softmax_backward,
             {out.tensor(TensorRole::output), out.tensor(TensorRole::gradient),
              out.tensor(TensorRole::input_gradient, 0), integer(rows), integer(cols), flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec softmax_spec = {
    .op = Op::softmax,
    .name = "softmax",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::float32,
};

}  // namespace mplan::ops
