// gelu: x * Phi(x), PyTorch's GELU (ViT's and ConvNeXt's MLPs): the erf form,
// or with `approximate: tanh` the tanh approximation. Backward reads X.

#include "ops/activation.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  const std::string approximate = r.optional_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    r.fail(r.get("approximate"), fmt::format("approximate must be none or tanh, got '{}'", approximate));
  layer.tanh_approximation = approximate == "tanh";
}

std::string signature(const Layer& layer) { return layer.tanh_approximation ? " approximate=tanh" : ""; }

std::vector<rt::Arg> extra(const Layer& layer) { return {flag(layer.tanh_approximation)}; }

constexpr ActivationKernels kKernels{.forward = rt::Kernel::gelu_forward,
                                     .backward = rt::Kernel::gelu_backward,
                                     .flops_per_element = 12,
                                     .extra = extra};

}  // namespace

extern const OpSpec gelu_spec = activation_spec<kKernels>({
    .op = Op::gelu,
    .name = "gelu",
    .fields = {"approximate"},
    .read_fields = read_fields,
    .signature = signature,
});

}  // namespace mplan::ops
