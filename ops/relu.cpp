// relu: y = max(x, 0). Backward needs only y (dX = dY * (Y > 0)), so Y may
// overwrite X.

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{
    .forward = rt::Kernel::relu_forward, .backward = rt::Kernel::relu_backward, .backward_reads_output = true};

}  // namespace

extern const OpSpec relu_spec = activation_spec<kKernels>({
    .op = Op::relu,
    .name = "relu",
    .in_place = InPlace::overwrites_input,
});

}  // namespace mplan::ops
