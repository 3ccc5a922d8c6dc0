// reshape: the same elements in another per-sample shape (torch.reshape of
// the sample; flatten is the 1-D case). A copy, as the runtime keeps buffers
// apart; backward copies dY back.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  if (!r.has("shape")) r.fail(r.node(), "missing 'shape' (the per-sample output shape, a list of sizes)");
  const YAML::Node list = r.get("shape");
  if (!list.IsSequence() || list.size() == 0 || list.size() > 8)
    r.fail(list, fmt::format("shape must be a list of 1 to 8 sizes, got {}", describe_node(list)));
  layer.shape.clear();
  for (const YAML::Node& item : list) layer.shape.push_back(r.int_value(item, "shape", 1));
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  Shape out{layer.shape};
  if (out.dims.empty() || !is_valid_size(out))
    return failure(fmt::format("shape {} is not a shape of sizes >= 1", out.to_string()));
  if (out.elements() != in.shapes[0].elements())
    return failure(fmt::format("shape {} has {} elements, its input {} is {} with {}", out.to_string(),
                               out.elements(), describe_input(in, 0), in.shapes[0].to_string(),
                               in.shapes[0].elements()));
  return {out, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  return {streaming(2 * elements(task.output, b) * task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const rt::Arg count = integer(ctx.samples * task.output.elements());
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::copy_or_add,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::output), count, flag(false)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0),
                                       count, flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec reshape_spec = {
    .op = Op::reshape,
    .name = "reshape",
    .fields = {"shape"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
