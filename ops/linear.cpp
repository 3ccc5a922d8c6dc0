// linear: y = x W^T + b over the last axis, PyTorch's Linear (W is (out, in)):
// on a vector [N] (flatten feature maps first), or on each token of a
// sequence [T, N] (a transformer's projections and MLPs).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.out = r.required_int("out", 1);
  layer.bias = r.optional_bool("bias", true);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (in.shapes[0].dims.size() != 2)
    if (auto why = need_rank(layer, in, 1, "1-D [N]"); !why.empty()) return failure(why);
  if (auto why = check_range("out", layer.out, 1); !why.empty()) return failure(why);
  if (!fits_elements({layer.out, in.shapes[0].dims.back()}))
    return failure(fmt::format("its weights are too large (at most {} elements)", kMaxElements));
  Shape out = in.shapes[0];
  out.dims.back() = layer.out;
  return {out, {}};
}

// Input features (the last axis) and rows per sample (tokens; 1 for a vector).
int64_t features_in(const Shape& x) { return x.dims.back(); }
int64_t rows_per_sample(const Shape& x) { return x.elements() / x.dims.back(); }

std::vector<LayerTensor> parameters(const Layer& layer, const std::vector<Shape>& inputs) {
  const int64_t in = features_in(inputs.at(0));
  std::vector<LayerTensor> tensors{{"weight", {layer.out, in}, TensorInit::uniform_fan_in, in}};
  if (layer.bias) tensors.push_back({"bias", {layer.out}, TensorInit::uniform_fan_in, in});
  return tensors;
}

BackwardNeeds bp1_needs(const Layer&) { return {.weight = true}; }
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true}; }

std::string signature(const Layer& layer) { return fmt::format(" bias={}", layer.bias ? 1 : 0); }

// cuBLAS SGEMMs: Y = X W^T, dX = dY W, dW = dY^T X (a b-long reduction).
std::vector<WorkEstimate> work(const OpTask& task, int64_t b0) {
  const double in = static_cast<double>(features_in(task.inputs.at(0)));
  const int64_t b = b0 * rows_per_sample(task.inputs.at(0));  // rows of the GEMMs
  const double out = static_cast<double>(task.layer.out);
  const double e = task.element_bytes;
  const double x = in * b * e, y = out * b * e, w = in * out * e;
  const double flops = 2.0 * b * in * out;
  switch (task.kind) {
    case TaskKind::FP: {
      std::vector<WorkEstimate> list{{flops, x + w + y, b * out, WorkClass::gemm, 1}};
      if (task.layer.bias) list.push_back(streaming(2 * y));
      return list;
    }
    case TaskKind::BP1: return {{flops, y + w + x, b * in, WorkClass::gemm, 1}};
    default: {
      std::vector<WorkEstimate> list{{flops, x + y + 2 * w, in * out, WorkClass::gemm, 1}};
      if (task.layer.bias) list.push_back(streaming(y));
      return list;
    }
  }
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t n = ctx.samples * rows_per_sample(task.inputs.at(0)), in = features_in(task.inputs.at(0));
  const int64_t features = task.layer.out;
  switch (task.kind) {
    case TaskKind::FP:
      out.call(rt::Kernel::linear_forward,
               {out.tensor(TensorRole::input), out.tensor(TensorRole::weight),
                task.layer.bias ? out.tensor(TensorRole::weight, 0, in * features) : null_pointer(),
                out.tensor(TensorRole::output), integer(n), integer(in), integer(features)});
      return;
    case TaskKind::BP1:
      if (!writes_gradient(ctx, 0)) return;
      out.call(rt::Kernel::linear_backward_data,
               {out.tensor(TensorRole::weight), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::input_gradient, 0), integer(n), integer(in), integer(features),
                flag(accumulates(ctx, 0))});
      return;
    case TaskKind::BP2:
      out.call(rt::Kernel::linear_backward_weights,
               {out.tensor(TensorRole::input), out.tensor(TensorRole::gradient), out.tensor(TensorRole::weight_grad),
                integer(n), integer(in), integer(features)});
      if (task.layer.bias)
        out.call(rt::Kernel::linear_backward_bias,
                 {out.tensor(TensorRole::gradient), out.tensor(TensorRole::weight_grad, 0, in * features), integer(n),
                  integer(features)});
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec linear_spec = {
    .op = Op::linear,
    .name = "linear",
    .fields = {"out", "bias"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .paper_class = PaperClass::fully_connected,
    .signature = signature,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::low_precision,
};

}  // namespace mplan::ops
