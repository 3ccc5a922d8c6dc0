// channel_scale: a learned factor per channel, y = x * weight[c] on a
// [C, H, W] input (ConvNeXt's layer scale; torchvision's parameter has shape
// (C, 1, 1), kept here). The weight starts at 1 (torchvision starts it at
// 1e-6; a model fine-tuned from its weights loads theirs).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  return {in.shapes[0], {}};
}

std::vector<LayerTensor> parameters(const Layer&, const std::vector<Shape>& inputs) {
  return {{"weight", {inputs.at(0).dims.at(0), 1, 1}, TensorInit::ones, 0}};
}

BackwardNeeds bp1_needs(const Layer&) { return {.weight = true}; }  // dX = dY * weight
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true}; }  // dweight = sum(dY * X)

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {streaming(2 * y, 1, y / task.element_bytes)};
  if (task.kind == TaskKind::BP1) return {streaming(2 * y, 1, y / task.element_bytes)};
  return {streaming(2 * y, 1, 2 * y / task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  auto [c, hw] = channels_and_hw(task.inputs.at(0));
  const std::vector<rt::Arg> sizes{integer(ctx.samples), integer(c), integer(hw), flag(false)};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  switch (task.kind) {
    case TaskKind::FP:
      out.call(rt::Kernel::channel_mul_forward, with_sizes({out.tensor(TensorRole::input),
                                                            out.tensor(TensorRole::weight),
                                                            out.tensor(TensorRole::output)}));
      return;
    case TaskKind::BP1: {
      if (!writes_gradient(ctx, 0)) return;
      std::vector<rt::Arg> args = with_sizes({out.tensor(TensorRole::weight), out.tensor(TensorRole::gradient),
                                              out.tensor(TensorRole::input_gradient, 0)});
      args.push_back(flag(accumulates(ctx, 0)));
      out.call(rt::Kernel::channel_mul_backward_x, std::move(args));
      return;
    }
    case TaskKind::BP2: {
      std::vector<rt::Arg> args = with_sizes({out.tensor(TensorRole::input), out.tensor(TensorRole::gradient),
                                              out.tensor(TensorRole::weight_grad)});
      args.push_back(flag(true));  // weight gradients accumulate (runtime/ops.h)
      out.call(rt::Kernel::channel_mul_backward_s, std::move(args));
      return;
    }
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec channel_scale_spec = {
    .op = Op::channel_scale,
    .name = "channel_scale",
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::follow_inputs_and_weight,
};

}  // namespace mplan::ops
