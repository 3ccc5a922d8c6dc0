// adaptive_avgpool: average pooling to a given output size, PyTorch's
// AdaptiveAvgPool2d (output cell i averages input rows floor(i*H/out) ..
// ceil((i+1)*H/out) - 1; columns alike). `out: [h, w]` or one number for
// both; an output larger than the input repeats input cells, as PyTorch does.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  auto [h, w] = r.required_pair("out", 1);
  layer.out_h = h;
  layer.out_w = w;
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  for (const std::string& why : {check_range("out", layer.out_h, 1), check_range("out", layer.out_w, 1)})
    if (!why.empty()) return failure(why);
  return {Shape{{in.shapes[0].dims[0], layer.out_h, layer.out_w}}, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }  // dX spreads dY over each window

std::string signature(const Layer& layer) { return fmt::format(" out={}x{}", layer.out_h, layer.out_w); }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double e = task.element_bytes;
  const double x = elements(task.inputs.at(0), b) * e, y = elements(task.output, b) * e;
  if (task.kind == TaskKind::FP) return {streaming(x + y, 1, x / task.element_bytes)};
  return {streaming(2 * x + y)};  // zero dX, then add every window's share
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Shape& in = task.inputs.at(0);
  const std::vector<rt::Arg> sizes{integer(ctx.samples * in.dims.at(0)), integer(in.dims.at(1)),
                                   integer(in.dims.at(2)), integer(task.layer.out_h), integer(task.layer.out_w)};
  if (task.kind == TaskKind::FP) {
    std::vector<rt::Arg> args{out.tensor(TensorRole::input), out.tensor(TensorRole::output)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    out.call(rt::Kernel::adaptive_avg_pool_forward, std::move(args));
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    std::vector<rt::Arg> args{out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    args.push_back(flag(accumulates(ctx, 0)));
    out.call(rt::Kernel::adaptive_avg_pool_backward, std::move(args));
  }
}

}  // namespace

extern const OpSpec adaptive_avgpool_spec = {
    .op = Op::adaptive_avgpool,
    .name = "adaptive_avgpool",
    .fields = {"out"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
