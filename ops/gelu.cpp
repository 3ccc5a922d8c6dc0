// gelu: x * Phi(x), PyTorch's GELU (ViT's and ConvNeXt's MLPs): the erf form,
// or with `approximate: tanh` the tanh approximation. Backward reads X.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  const std::string approximate = r.optional_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    r.fail(r.get("approximate"), fmt::format("approximate must be none or tanh, got '{}'", approximate));
  layer.tanh_approximation = approximate == "tanh";
}

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

std::string signature(const Layer& layer) { return layer.tanh_approximation ? " approximate=tanh" : ""; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 12); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::gelu_forward, rt::Kernel::gelu_backward, /*from_output=*/false,
                    {flag(task.layer.tanh_approximation)});
}

}  // namespace

extern const OpSpec gelu_spec = {
    .op = Op::gelu,
    .name = "gelu",
    .fields = {"approximate"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
