// hardsigmoid: relu6(x + 3) / 6, PyTorch's Hardsigmoid (MobileNet v3's
// squeeze-and-excitation gate). Backward reads X.

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{
    .forward = rt::Kernel::hardsigmoid_forward, .backward = rt::Kernel::hardsigmoid_backward, .flops_per_element = 3};

}  // namespace

extern const OpSpec hardsigmoid_spec = activation_spec<kKernels>({.op = Op::hardsigmoid, .name = "hardsigmoid"});

}  // namespace mplan::ops
