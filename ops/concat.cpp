// concat: the inputs side by side along the channel axis (inception and dense
// joins). Backward slices dY back to each input; it needs no forward data. One
// input is a copy (torchvision's DenseNet concatenates its first layer's
// input list of one tensor).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) {
  const Shape& first = in.shapes[0];
  Shape out = first;
  for (size_t k = 1; k < in.shapes.size(); ++k) {
    bool same_rest = in.shapes[k].dims.size() == first.dims.size();
    for (size_t d = 1; same_rest && d < first.dims.size(); ++d) same_rest = in.shapes[k].dims[d] == first.dims[d];
    if (!same_rest)
      return failure(fmt::format(
          "concat joins along the channel axis, so its inputs must agree in every other dimension, but {} is {} and "
          "{} is {}",
          describe_input(in, 0), first.to_string(), describe_input(in, k), in.shapes[k].to_string()));
    out.dims[0] += in.shapes[k].dims[0];  // each <= kMaxElements: no overflow for sane counts
    if (out.dims[0] > kMaxElements) return failure("the concatenated channel count is too large");
  }
  return {out, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  double all_inputs = 0;
  for (const Shape& in : task.inputs) all_inputs += elements(in, b) * task.element_bytes;
  return {streaming(all_inputs + elements(task.output, b) * task.element_bytes, static_cast<int>(task.inputs.size()))};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t hw = channels_and_hw(task.output).second, total = task.output.dims.at(0);
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Shape& in : task.inputs) {
    offsets.push_back(at);
    at += in.dims.at(0);
  }
  auto channels = [&](int k) { return task.inputs[k].dims.at(0); };
  if (task.kind == TaskKind::FP) {
    for (int k = 0; k < static_cast<int>(task.inputs.size()); ++k)
      out.call(rt::Kernel::concat_forward,
               {out.tensor(TensorRole::input, k), out.tensor(TensorRole::output), integer(ctx.samples), integer(total),
                integer(offsets[k]), integer(channels(k)), integer(hw)});
  } else if (task.kind == TaskKind::BP1) {
    for_each_input_gradient(task, ctx, [&](int k, bool accumulate) {
      out.call(rt::Kernel::concat_backward,
               {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, k), integer(ctx.samples),
                integer(total), integer(offsets[k]), integer(channels(k)), integer(hw), flag(accumulate)});
    });
  }
}

}  // namespace

extern const OpSpec concat_spec = {
    .op = Op::concat,
    .name = "concat",
    // A concat of one input is the identity: torchvision's DenseNet and ONNX's
    // Concat have it.
    .min_inputs = 1,
    .max_inputs = -1,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
