// lrn: local response normalisation across channels, PyTorch's LocalResponseNorm
// (size, alpha, beta, k). Backward reads X, Y and dY, as cuDNN's does.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.lrn_size = r.optional_int("size", 5, 1);
  layer.alpha = r.optional_double("alpha", 1e-4);
  layer.beta = r.optional_double("beta", 0.75);
  layer.k = r.optional_double("k", 2.0);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  if (auto why = check_range("size", layer.lrn_size, 1); !why.empty()) return failure(why);
  return {in.shapes[0], {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true, .output = true}; }

std::string signature(const Layer& layer) { return fmt::format(" size={}", layer.lrn_size); }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double e = task.element_bytes;
  const double x = elements(task.inputs.at(0), b) * e, y = elements(task.output, b) * e;
  const double flops = elements(task.output, b) * (2.0 * task.layer.lrn_size + 10);
  if (task.kind == TaskKind::FP) return {streaming(x + y, 1, flops)};
  return {streaming(2 * x + 2 * y, 1, 2 * flops)};  // read X, Y, dY; write dX
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  auto [c, hw] = channels_and_hw(task.inputs.at(0));
  const Layer& l = task.layer;
  const std::vector<rt::Arg> params = {integer(l.lrn_size), real(static_cast<float>(l.alpha)),
                                       real(static_cast<float>(l.beta)), real(static_cast<float>(l.k))};
  std::vector<rt::Arg> args;
  if (task.kind == TaskKind::FP) {
    args = {out.tensor(TensorRole::input), out.tensor(TensorRole::output), integer(ctx.samples), integer(c),
            integer(hw)};
    args.insert(args.end(), params.begin(), params.end());
    out.call(rt::Kernel::lrn_forward, std::move(args));
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    args = {out.tensor(TensorRole::input), out.tensor(TensorRole::output), out.tensor(TensorRole::gradient),
            out.tensor(TensorRole::input_gradient, 0), integer(ctx.samples), integer(c), integer(hw)};
    args.insert(args.end(), params.begin(), params.end());
    args.push_back(flag(accumulates(ctx, 0)));
    out.call(rt::Kernel::lrn_backward, std::move(args));
  }
}

}  // namespace

extern const OpSpec lrn_spec = {
    .op = Op::lrn,
    .name = "lrn",
    .fields = {"size", "alpha", "beta", "k"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
