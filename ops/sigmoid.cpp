// sigmoid: 1 / (1 + exp(-x)), PyTorch's Sigmoid (squeeze-and-excitation gates).
// Backward needs only Y: dX = dY * Y * (1 - Y).

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{.forward = rt::Kernel::sigmoid_forward,
                                     .backward = rt::Kernel::sigmoid_backward,
                                     .backward_reads_output = true,
                                     .flops_per_element = 5};

}  // namespace

extern const OpSpec sigmoid_spec = activation_spec<kKernels>({.op = Op::sigmoid, .name = "sigmoid"});

}  // namespace mplan::ops
