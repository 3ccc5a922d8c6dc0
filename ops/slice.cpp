// slice: the range [begin, end) of one axis of the per-sample shape (axis 0:
// channels of [C, H, W], tokens of [T, D]): torch.chunk's and narrow's
// pieces (ShuffleNet's split), ViT's class token (slice axis 0 to 1). A
// copy; backward writes dY into its range of dX (zero elsewhere, or adds
// there only) and needs nothing from the forward pass.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.axis = r.optional_int("axis", 0, 0);
  layer.begin = r.optional_int("begin", 0, 0);
  layer.end = r.required_int("end", 1);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  const Shape& x = in.shapes[0];
  if (layer.axis < 0 || layer.axis >= static_cast<int64_t>(x.dims.size()))
    return failure(fmt::format("axis {} is not an axis of its input {} ({} axes, counted from 0)", layer.axis,
                               x.to_string(), x.dims.size()));
  const int64_t size = x.dims[layer.axis];
  if (layer.begin < 0 || layer.end > size || layer.begin >= layer.end)
    return failure(fmt::format("[begin, end) = [{}, {}) is not a non-empty range of axis {} of size {}", layer.begin,
                               layer.end, layer.axis, size));
  Shape out = x;
  out.dims[layer.axis] = layer.end - layer.begin;
  return {out, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::string signature(const Layer& layer) {
  return fmt::format(" axis={} begin={} end={}", layer.axis, layer.begin, layer.end);
}

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double e = task.element_bytes;
  const double x = elements(task.inputs.at(0), b) * e, y = elements(task.output, b) * e;
  if (task.kind == TaskKind::FP) return {streaming(2 * y)};
  return {streaming(x + y)};  // read dY, write all of dX
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Shape& x = task.inputs.at(0);
  const int64_t axis = task.layer.axis;
  int64_t outer = ctx.samples, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.dims.size(); ++d) inner *= x.dims[d];
  const std::vector<rt::Arg> sizes{integer(outer), integer(x.dims[axis] * inner), integer(task.layer.begin * inner),
                                   integer((task.layer.end - task.layer.begin) * inner)};
  if (task.kind == TaskKind::FP) {
    std::vector<rt::Arg> args{out.tensor(TensorRole::input), out.tensor(TensorRole::output)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    out.call(rt::Kernel::slice_forward, std::move(args));
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    std::vector<rt::Arg> args{out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    args.push_back(flag(accumulates(ctx, 0)));
    out.call(rt::Kernel::slice_backward, std::move(args));
  }
}

}  // namespace

extern const OpSpec slice_spec = {
    .op = Op::slice,
    .name = "slice",
    .fields = {"axis", "begin", "end"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
