// class_token: a learned token put before a sequence, [T, D] -> [T + 1, D]
// (ViT's class_token, torch.cat of its expansion over the batch with the
// patches). Parameter "weight" (1, 1, D), zeros at the start, as torchvision.
// Backward: dX is dY without its first token; the token's gradient is the
// first token's summed over the samples (BP2, from dY alone).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) {
  const Shape& x = in.shapes[0];
  if (x.dims.size() != 2)
    return failure(fmt::format("class_token needs a sequence [T, D] but its input {} is {}", describe_input(in, 0),
                               x.to_string()));
  return {Shape{{x.dims[0] + 1, x.dims[1]}}, {}};
}

std::vector<LayerTensor> parameters(const Layer&, const std::vector<Shape>& inputs) {
  return {{"weight", {1, 1, inputs.at(0).dims.at(1)}, TensorInit::zeros, 0}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }
BackwardNeeds bp2_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes;
  if (task.kind == TaskKind::BP2) return {streaming(y / task.output.dims.at(0))};
  return {streaming(2 * y)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Shape& x = task.inputs.at(0);
  const std::vector<rt::Arg> sizes{integer(ctx.samples), integer(x.dims.at(0)), integer(x.dims.at(1))};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  switch (task.kind) {
    case TaskKind::FP:
      out.call(rt::Kernel::class_token_forward, with_sizes({out.tensor(TensorRole::input),
                                                            out.tensor(TensorRole::weight),
                                                            out.tensor(TensorRole::output)}));
      return;
    case TaskKind::BP1: {
      if (!writes_gradient(ctx, 0)) return;
      std::vector<rt::Arg> args =
          with_sizes({out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0)});
      args.push_back(flag(accumulates(ctx, 0)));
      out.call(rt::Kernel::class_token_backward_data, std::move(args));
      return;
    }
    case TaskKind::BP2:
      out.call(rt::Kernel::class_token_backward_param,
               with_sizes({out.tensor(TensorRole::gradient), out.tensor(TensorRole::weight_grad)}));
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec class_token_spec = {
    .op = Op::class_token,
    .name = "class_token",
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::follow_inputs_and_weight,
};

}  // namespace mplan::ops
