// layernorm: layer normalisation over one axis, with a learned scale and
// shift per element of that axis (PyTorch's LayerNorm over the last
// dimension): over the channels of a [C, H, W] input at every pixel
// (ConvNeXt's LayerNorm2d), over the features of a [T, D] or [N] input (ViT).
// FP saves each position's mean and 1/std for BP.
//
// Blocks: W = [weight (C) | bias (C)], saved = [mean | invstd], one each per position.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.eps = r.optional_double("eps", 1e-5);
  if (!(layer.eps > 0)) r.fail(r.get("eps"), fmt::format("eps must be positive, got {}", layer.eps));
}

// The kernels' (outer per sample, c, inner) view of the input.
struct Axes {
  int64_t outer = 1, c = 1, inner = 1;
};
Axes axes_of(const Shape& x) {
  if (x.dims.size() == 3) return {1, x.dims[0], x.dims[1] * x.dims[2]};  // channels of [C, H, W]
  if (x.dims.size() == 2) return {x.dims[0], x.dims[1], 1};               // features of [T, D]
  return {1, x.dims.at(0), 1};                                            // features of [N]
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  const Shape& x = in.shapes[0];
  if (x.dims.empty() || x.dims.size() > 3)
    return failure(fmt::format("layernorm needs a [C, H, W], [T, D] or [N] input but its input {} is {}",
                               describe_input(in, 0), x.to_string()));
  if (!(layer.eps > 0)) return failure(fmt::format("eps must be positive, got {}", layer.eps));
  return {x, {}};
}

std::vector<LayerTensor> parameters(const Layer&, const std::vector<Shape>& inputs) {
  const int64_t c = axes_of(inputs.at(0)).c;
  return {{"weight", {c}, TensorInit::ones, 0}, {"bias", {c}, TensorInit::zeros, 0}};
}

int64_t positions(const Shape& x) { return x.elements() / axes_of(x).c; }

SavedBytes saved(const Layer&, const std::vector<Shape>& inputs, const Shape&) {
  return {2 * positions(inputs.at(0)) * static_cast<int64_t>(kFloatBytes), 0};
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true, .weight = true, .saved = true}; }
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true, .saved = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double e = task.element_bytes;
  const double x = elements(task.inputs.at(0), b) * e;
  if (task.kind == TaskKind::FP) return {streaming(3 * x, 1, 8 * x / e)};  // statistics, then normalise
  if (task.kind == TaskKind::BP1) return {streaming(4 * x, 1, 12 * x / e)};
  return {streaming(2 * x, 1, 4 * x / e)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Axes a = axes_of(task.inputs.at(0));
  const int64_t outer = ctx.samples * a.outer, per_sample = positions(task.inputs.at(0));
  auto mean = [&] { return out.tensor(TensorRole::saved); };
  // The saved block is [mean | invstd] for the whole call (samples * positions each).
  auto invstd = [&] { return out.tensor(TensorRole::saved, 0, ctx.samples * per_sample); };
  const std::vector<rt::Arg> sizes{integer(outer), integer(a.c), integer(a.inner)};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  switch (task.kind) {
    case TaskKind::FP: {
      std::vector<rt::Arg> args = with_sizes({out.tensor(TensorRole::input), out.tensor(TensorRole::weight),
                                              out.tensor(TensorRole::weight, 0, a.c), out.tensor(TensorRole::output),
                                              mean(), invstd()});
      args.push_back(real(static_cast<float>(task.layer.eps)));
      out.call(rt::Kernel::layernorm_forward, std::move(args));
      return;
    }
    case TaskKind::BP1: {
      if (!writes_gradient(ctx, 0)) return;
      std::vector<rt::Arg> args =
          with_sizes({out.tensor(TensorRole::input), out.tensor(TensorRole::weight), mean(), invstd(),
                      out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0)});
      args.push_back(flag(accumulates(ctx, 0)));
      out.call(rt::Kernel::layernorm_backward_data, std::move(args));
      return;
    }
    case TaskKind::BP2:
      out.call(rt::Kernel::layernorm_backward_params,
               with_sizes({out.tensor(TensorRole::input), mean(), invstd(), out.tensor(TensorRole::gradient),
                           out.tensor(TensorRole::weight_grad), out.tensor(TensorRole::weight_grad, 0, a.c)}));
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec layernorm_spec = {
    .op = Op::layernorm,
    .name = "layernorm",
    .fields = {"eps"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .parameters = parameters,
    .saved = saved,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::float32,
};

}  // namespace mplan::ops
