// silu: x * sigmoid(x), PyTorch's SiLU (swish; EfficientNet). Backward reads X.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 6); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::silu_forward, rt::Kernel::silu_backward, /*from_output=*/false);
}

}  // namespace

extern const OpSpec silu_spec = {
    .op = Op::silu,
    .name = "silu",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
