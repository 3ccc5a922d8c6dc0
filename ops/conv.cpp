// conv: 2-D convolution, PyTorch's Conv2d (groups, stride, zero padding,
// dilation, bias); depthwise when groups = input channels.
// Its tasks choose among algorithms (moDNN Eq. 5) and may run as micro-batches
// (mu-cuDNN §III); their work is the algorithm's (profiler/conv_algorithms.h).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.out = r.required_int("out", 1);
  auto [kernel_h, kernel_w] = r.required_pair("kernel", 1);
  auto [stride_h, stride_w] = r.optional_pair("stride", {1, 1}, 1);
  auto [pad_h, pad_w] = r.optional_pair("pad", {0, 0}, 0);
  auto [dilation_h, dilation_w] = r.optional_pair("dilation", {1, 1}, 1);
  layer.window = Window{kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w};
  layer.groups = r.optional_int("groups", 1, 1);
  layer.bias = r.optional_bool("bias", true);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  for (const std::string& why :
       {check_range("out", layer.out, 1), check_range("groups", layer.groups, 1), check_window(layer.window)})
    if (!why.empty()) return failure(why);
  const int64_t in_channels = in.shapes[0].dims[0];
  if (in_channels % layer.groups != 0)
    return failure(fmt::format("its {} input channels are not divisible by groups = {}", in_channels, layer.groups));
  if (layer.out % layer.groups != 0)
    return failure(fmt::format("out = {} is not divisible by groups = {}", layer.out, layer.groups));
  if (!fits_elements({layer.out, in_channels / layer.groups, layer.window.kernel_h, layer.window.kernel_w}))
    return failure(fmt::format("its weights are too large (at most {} elements)", kMaxElements));
  const Window& w = layer.window;
  for (const std::string& why : {check_range("dilation", w.dilation_h, 1), check_range("dilation", w.dilation_w, 1)})
    if (!why.empty()) return failure(why);
  // A dilated filter covers (kernel - 1) * dilation + 1 input pixels.
  Window extent = w;
  extent.kernel_h = (w.kernel_h - 1) * w.dilation_h + 1;
  extent.kernel_w = (w.kernel_w - 1) * w.dilation_w + 1;
  ShapeOrMessage out = spatial_output(extent, in.shapes[0], layer.out, /*ceil_mode=*/false);
  if (!out.ok() && (w.dilation_h != 1 || w.dilation_w != 1))
    out.error += fmt::format(" (kernel {}x{} at dilation {}x{})", w.kernel_h, w.kernel_w, w.dilation_h, w.dilation_w);
  return out;
}

// weight (out, C/groups, kh, kw) and bias (out), both uniform in
// +-1/sqrt(fan_in) (PyTorch's default initialisation bound).
std::vector<LayerTensor> parameters(const Layer& layer, const std::vector<Shape>& inputs) {
  const int64_t per_group = inputs.at(0).dims.at(0) / layer.groups;
  const int64_t fan_in = per_group * layer.window.kernel_h * layer.window.kernel_w;
  std::vector<LayerTensor> tensors{
      {"weight", {layer.out, per_group, layer.window.kernel_h, layer.window.kernel_w}, TensorInit::uniform_fan_in,
       fan_in}};
  if (layer.bias) tensors.push_back({"bias", {layer.out}, TensorInit::uniform_fan_in, fan_in});
  return tensors;
}

BackwardNeeds bp1_needs(const Layer&) { return {.weight = true}; }  // dX = W^T * dY
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true}; }  // dW = dY * X^T

std::string signature(const Layer& layer) {
  const Window& w = layer.window;
  const std::string dilation =
      w.dilation_h == 1 && w.dilation_w == 1 ? "" : fmt::format(" dilation={}x{}", w.dilation_h, w.dilation_w);
  return fmt::format(" kernel={}x{} stride={}x{} pad={}x{} groups={} bias={}{}", w.kernel_h, w.kernel_w, w.stride_h,
                     w.stride_w, w.pad_h, w.pad_w, layer.groups, layer.bias ? 1 : 0, dilation);
}

rt::ConvShape conv_shape(const OpTask& task, int64_t n) {
  const Shape& in = task.inputs.at(0);
  const Window& w = task.layer.window;
  rt::ConvShape s;
  s.n = n;
  s.c = in.dims.at(0);
  s.h = in.dims.at(1);
  s.w = in.dims.at(2);
  s.k = task.layer.out;
  s.r = w.kernel_h;
  s.s = w.kernel_w;
  s.stride_h = w.stride_h;
  s.stride_w = w.stride_w;
  s.pad_h = w.pad_h;
  s.pad_w = w.pad_w;
  s.groups = task.layer.groups;
  s.dilation_h = w.dilation_h;
  s.dilation_w = w.dilation_w;
  return s;
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const rt::ConvShape shape = conv_shape(task, ctx.samples);
  const bool micro = ctx.micro_batches.size() > 1;
  // The planned algorithm, or mu-cuDNN's list of micro-batches.
  const rt::Arg algorithm = micro ? rt::Arg::of(ctx.micro_batches) : integer(ctx.algorithm);
  const rt::Arg workspace = ctx.workspace_bytes > 0 ? out.tensor(TensorRole::workspace) : null_pointer();
  const rt::Arg workspace_bytes = integer(ctx.workspace_bytes);
  const int64_t weights = shape.w_elements();
  switch (task.kind) {
    case TaskKind::FP:
      out.call(micro ? rt::Kernel::conv_forward_micro : rt::Kernel::conv_forward,
               {rt::Arg::of(shape), algorithm, out.tensor(TensorRole::input), out.tensor(TensorRole::weight),
                task.layer.bias ? out.tensor(TensorRole::weight, 0, weights) : null_pointer(),
                out.tensor(TensorRole::output), workspace, workspace_bytes});
      return;
    case TaskKind::BP1:
      if (!writes_gradient(ctx, 0)) return;
      out.call(micro ? rt::Kernel::conv_backward_data_micro : rt::Kernel::conv_backward_data,
               {rt::Arg::of(shape), algorithm, out.tensor(TensorRole::weight), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::input_gradient, 0), workspace, workspace_bytes, flag(accumulates(ctx, 0))});
      return;
    case TaskKind::BP2:
      out.call(micro ? rt::Kernel::conv_backward_filter_micro : rt::Kernel::conv_backward_filter,
               {rt::Arg::of(shape), algorithm, out.tensor(TensorRole::input), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::weight_grad), workspace, workspace_bytes});
      if (task.layer.bias)
        out.call(rt::Kernel::conv_backward_bias, {rt::Arg::of(shape), out.tensor(TensorRole::gradient),
                                                  out.tensor(TensorRole::weight_grad, 0, weights)});
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec conv_spec = {
    .op = Op::conv,
    .name = "conv",
    .fields = {"out", "kernel", "stride", "pad", "dilation", "groups", "bias"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .paper_class = PaperClass::conv,
    .has_algorithms = true,
    .signature = signature,
    .invoke = invoke,
    .autocast = Autocast::low_precision,
};

}  // namespace mplan::ops
