// channel_shuffle: ShuffleNet's channel shuffle, the view (g, C/g, ...), the
// transpose of the first two axes and the view back as one copy: output
// channel j*g + i is input channel i*(C/g) + j. Backward is the shuffle with
// C/g groups and needs nothing from the forward pass.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) { layer.groups = r.required_int("groups", 1); }

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  const Shape& x = in.shapes[0];
  if (auto why = check_range("groups", layer.groups, 1); !why.empty()) return failure(why);
  if (x.dims[0] % layer.groups != 0)
    return failure(fmt::format("its {} channels are not divisible by groups = {}", x.dims[0], layer.groups));
  return {x, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::string signature(const Layer& layer) { return fmt::format(" groups={}", layer.groups); }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  return {streaming(2 * elements(task.output, b) * task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  auto [c, inner] = channels_and_hw(task.inputs.at(0));
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::channel_shuffle, {out.tensor(TensorRole::input), out.tensor(TensorRole::output),
                                           integer(ctx.samples), integer(c), integer(inner),
                                           integer(task.layer.groups), flag(false)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::channel_shuffle,
             {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0), integer(ctx.samples),
              integer(c), integer(inner), integer(c / task.layer.groups), flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec channel_shuffle_spec = {
    .op = Op::channel_shuffle,
    .name = "channel_shuffle",
    .fields = {"groups"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
