// hardsigmoid: relu6(x + 3) / 6, PyTorch's Hardsigmoid (MobileNet v3's
// squeeze-and-excitation gate). Backward reads X.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 3); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::hardsigmoid_forward, rt::Kernel::hardsigmoid_backward, /*from_output=*/false);
}

}  // namespace

extern const OpSpec hardsigmoid_spec = {
    .op = Op::hardsigmoid,
    .name = "hardsigmoid",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
