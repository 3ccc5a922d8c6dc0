// hardswish: x * relu6(x + 3) / 6, PyTorch's Hardswish (MobileNet v3). Backward
// reads X (runtime/ops_vision.h).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 4); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::hardswish_forward, rt::Kernel::hardswish_backward, /*from_output=*/false);
}

}  // namespace

extern const OpSpec hardswish_spec = {
    .op = Op::hardswish,
    .name = "hardswish",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
