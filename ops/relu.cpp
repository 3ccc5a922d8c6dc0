// relu: y = max(x, 0). Backward needs only y (dX = dY * (Y > 0)).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.output = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * kFloatBytes;
  if (task.kind == TaskKind::FP) return {streaming(2 * y)};
  return {streaming(3 * y)};  // read Y and dY, write dX
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t count = ctx.samples * task.output.elements();
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::relu_forward, {out.tensor(TensorRole::input), out.tensor(TensorRole::output), integer(count)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::relu_backward, {out.tensor(TensorRole::output), out.tensor(TensorRole::gradient),
                                         out.tensor(TensorRole::input_gradient, 0), integer(count),
                                         flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec relu_spec = {
    .op = Op::relu,
    .name = "relu",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .in_place = InPlace::overwrites_input,
    .paper_class = PaperClass::cheap,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
