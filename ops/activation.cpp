// The parts of an activation's entry (ops/activation.h) that do not depend on its kernels.

#include "ops/activation.h"

namespace mplan::ops::detail {

ShapeOrMessage same_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

BackwardNeeds reads_input(const Layer&) { return {.inputs = true}; }

BackwardNeeds reads_output(const Layer&) { return {.output = true}; }

void invoke_activation(const OpTask& task, const InvocationContext& ctx, Invocation& out, const ActivationKernels& k) {
  const rt::Arg count = rt::Arg::of(ctx.samples * task.output.elements());
  const std::vector<rt::Arg> extra = k.extra != nullptr ? k.extra(task.layer) : std::vector<rt::Arg>{};
  if (task.kind == TaskKind::FP) {
    std::vector<rt::Arg> args{out.tensor(TensorRole::input), out.tensor(TensorRole::output), count};
    args.insert(args.end(), extra.begin(), extra.end());
    out.call(k.forward, std::move(args));
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    std::vector<rt::Arg> args{out.tensor(k.backward_reads_output ? TensorRole::output : TensorRole::input),
                              out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0), count};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(rt::Arg::of_flag(accumulates(ctx, 0)));
    out.call(k.backward, std::move(args));
  }
}

std::vector<WorkEstimate> activation_work(const OpTask& task, int64_t b, int flops_per_element) {
  const double y = elements(task.output, b) * task.element_bytes;
  const double flops = flops_per_element * elements(task.output, b);
  if (task.kind == TaskKind::FP) return {streaming(2 * y, 1, flops)};
  return {streaming(3 * y, 1, 2 * flops)};  // read X (or Y) and dY, write dX
}

}  // namespace mplan::ops::detail
