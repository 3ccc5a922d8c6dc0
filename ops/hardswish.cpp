// hardswish: x * relu6(x + 3) / 6, PyTorch's Hardswish (MobileNet v3). Backward
// reads X (runtime/ops_activations.h).

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{
    .forward = rt::Kernel::hardswish_forward, .backward = rt::Kernel::hardswish_backward, .flops_per_element = 4};

}  // namespace

extern const OpSpec hardswish_spec = activation_spec<kKernels>({.op = Op::hardswish, .name = "hardswish"});

}  // namespace mplan::ops
