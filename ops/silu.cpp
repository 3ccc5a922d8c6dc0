// silu: x * sigmoid(x), PyTorch's SiLU (swish; EfficientNet). Backward reads X.

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{
    .forward = rt::Kernel::silu_forward, .backward = rt::Kernel::silu_backward, .flops_per_element = 6};

}  // namespace

extern const OpSpec silu_spec = activation_spec<kKernels>({.op = Op::silu, .name = "silu"});

}  // namespace mplan::ops
