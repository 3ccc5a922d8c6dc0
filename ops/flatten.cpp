// flatten: [C, H, W] -> [C*H*W]: a copy, or nothing where the TDFG computes it
// in place (InPlace::view: Y and X then share one block, dX and dY too).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {Shape{{in.shapes[0].elements()}}, {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  return {streaming(2 * elements(task.output, b) * task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const rt::Arg count = integer(ctx.samples * task.output.elements());
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::copy_or_add,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::output), count, flag(false)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0),
                                       count, flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec flatten_spec = {
    .op = Op::flatten,
    .name = "flatten",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .in_place = InPlace::view,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
