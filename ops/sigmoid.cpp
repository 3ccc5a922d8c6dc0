// sigmoid: 1 / (1 + exp(-x)), PyTorch's Sigmoid (squeeze-and-excitation gates).
// Backward needs only Y: dX = dY * Y * (1 - Y).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.output = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 5); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::sigmoid_forward, rt::Kernel::sigmoid_backward, /*from_output=*/true);
}

}  // namespace

extern const OpSpec sigmoid_spec = {
    .op = Op::sigmoid,
    .name = "sigmoid",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
