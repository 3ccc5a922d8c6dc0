// pos_embed: a learned tensor of the input's shape added to every sample
// (ViT's position embedding, encoder.pos_embedding). Parameter "weight"
// (1, *shape) as torchvision's, uniform in +-0.02 at the start (torchvision
// draws it from a normal of std 0.02). Backward: dX = dY; the embedding's
// gradient is dY summed over the samples (BP2, from dY alone).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

// fan_in giving the uniform bound 1/sqrt(2500) = 0.02.
constexpr int64_t kFanInForBound002 = 2500;

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) { return {in.shapes[0], {}}; }

std::vector<LayerTensor> parameters(const Layer&, const std::vector<Shape>& inputs) {
  std::vector<int64_t> shape{1};
  for (int64_t d : inputs.at(0).dims) shape.push_back(d);
  return {{"weight", shape, TensorInit::uniform_fan_in, kFanInForBound002}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }
BackwardNeeds bp2_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {streaming(2 * y + y / b)};
  if (task.kind == TaskKind::BP1) return {streaming(2 * y)};
  return {streaming(y + 2 * y / b)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t count = task.output.elements();
  switch (task.kind) {
    case TaskKind::FP:
      out.call(rt::Kernel::pos_embed_forward, {out.tensor(TensorRole::input), out.tensor(TensorRole::weight),
                                               out.tensor(TensorRole::output), integer(ctx.samples), integer(count)});
      return;
    case TaskKind::BP1:
      if (!writes_gradient(ctx, 0)) return;
      out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0),
                                         integer(ctx.samples * count), flag(accumulates(ctx, 0))});
      return;
    case TaskKind::BP2:
      out.call(rt::Kernel::pos_embed_backward_param, {out.tensor(TensorRole::gradient),
                                                      out.tensor(TensorRole::weight_grad), integer(ctx.samples),
                                                      integer(count)});
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec pos_embed_spec = {
    .op = Op::pos_embed,
    .name = "pos_embed",
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::follow_inputs_and_weight,
};

}  // namespace mplan::ops
