// relu: y = max(x, 0). Backward needs only y (dX = dY * (Y > 0)), so Y may
// overwrite X. Its compact form (OpSpec::has_compact_backward) keeps one bit
// per element, Y > 0, for BP1, so that Y need not stay for the backward pass
// where no other backward task reads it (MONeT's operator variants: a ReLU
// before a max pool).

#include "ops/activation.h"

namespace mplan::ops {
namespace {

constexpr ActivationKernels kKernels{
    .forward = rt::Kernel::relu_forward, .backward = rt::Kernel::relu_backward, .backward_reads_output = true};

bool has_compact_backward(const Layer&) { return true; }

int64_t mask_bytes(int64_t elements) { return (elements + 7) / 8; }

SavedBytes saved(const Layer& layer, const std::vector<Shape>&, const Shape& output) {
  if (!layer.compact_backward) return {};
  return {mask_bytes(output.elements()), 0};  // a round of b samples needs at most b * this
}

BackwardNeeds bp1_needs(const Layer& layer) {
  if (layer.compact_backward) return {.saved = true};
  return {.output = true};
}

std::string signature(const Layer& layer) { return layer.compact_backward ? " backward=compact" : ""; }

// The plain form's traffic, plus the mask written forward and read instead of
// Y backward.
std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  if (!task.layer.compact_backward) return detail::activation_work(task, b, kKernels.flops_per_element);
  const double y = elements(task.output, b) * task.element_bytes;
  const double mask = static_cast<double>(mask_bytes(elements(task.output, b)));
  return {streaming(2 * y + mask)};  // FP: read X, write Y and the mask; BP1: read the mask and dY, write dX
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  if (!task.layer.compact_backward) return detail::invoke_activation(task, ctx, out, kKernels);
  const rt::Arg count = rt::Arg::of(ctx.samples * task.output.elements());
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::relu_forward_mask, {out.tensor(TensorRole::input), out.tensor(TensorRole::output),
                                             out.tensor(TensorRole::saved), count});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::relu_backward_mask,
             {out.tensor(TensorRole::saved), out.tensor(TensorRole::gradient),
              out.tensor(TensorRole::input_gradient, 0), count, flag(accumulates(ctx, 0))});
  }
}

OpSpec relu_entry() {
  OpSpec spec = activation_spec<kKernels>({
      .op = Op::relu,
      .name = "relu",
      .in_place = InPlace::overwrites_input,
  });
  spec.saved = saved;
  spec.bp1_needs = bp1_needs;
  spec.has_compact_backward = has_compact_backward;
  spec.signature = signature;
  spec.work = work;
  spec.invoke = invoke;
  return spec;
}

}  // namespace

extern const OpSpec relu_spec = relu_entry();

}  // namespace mplan::ops
