// pool: max or average pooling with PyTorch's semantics (ceil_mode; average
// pooling counts the padding, count_include_pad=True). Max pooling's backward
// routes each gradient to its window's maximum, so it reads X and Y (as cuDNN).
// Its compact form (OpSpec::has_compact_backward) records, per output, the
// place of that maximum in one byte, and BP1 reads only those bytes and dY
// (MONeT's operator variants; PyTorch keeps such indices too), so neither X
// nor Y need stay for it.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  const std::string mode = r.required_string("mode");
  if (mode == "max") {
    layer.pool_mode = PoolMode::max;
  } else if (mode == "avg") {
    layer.pool_mode = PoolMode::avg;
  } else {
    r.fail(r.get("mode"), fmt::format("mode must be max or avg, got '{}'", mode));
  }
  auto kernel = r.required_pair("kernel", 1);
  auto stride = r.optional_pair("stride", kernel, 1);  // PyTorch: stride defaults to kernel
  auto pad = r.optional_pair("pad", {0, 0}, 0);
  layer.window = Window{kernel.first, kernel.second, stride.first, stride.second, pad.first, pad.second};
  layer.ceil_mode = r.optional_bool("ceil_mode", false);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  const Window& w = layer.window;
  if (std::string why = check_window(w); !why.empty()) return failure(why);
  // PyTorch rejects pools whose padding exceeds half the kernel; the reference
  // checks run through PyTorch, so the format does too.
  if (2 * w.pad_h > w.kernel_h || 2 * w.pad_w > w.kernel_w)
    return failure(fmt::format("pad {}x{} is more than half of kernel {}x{}", w.pad_h, w.pad_w, w.kernel_h,
                               w.kernel_w));
  return spatial_output(w, in.shapes[0], in.shapes[0].dims[0], layer.ceil_mode);
}

bool has_compact_backward(const Layer& layer) {
  return layer.pool_mode == PoolMode::max &&
         layer.window.kernel_h * layer.window.kernel_w <= rt::kMaxIndexedPoolWindow;  // a place fits a byte
}

bool compact(const Layer& layer) { return layer.compact_backward && layer.pool_mode == PoolMode::max; }

SavedBytes saved(const Layer& layer, const std::vector<Shape>&, const Shape& output) {
  if (!compact(layer)) return {};
  return {output.elements(), 0};  // a byte per output
}

BackwardNeeds bp1_needs(const Layer& layer) {
  if (compact(layer)) return {.saved = true};
  if (layer.pool_mode == PoolMode::max) return {.inputs = true, .output = true};  // the argmax
  return {};                                                                      // avg: dY only
}

std::string signature(const Layer& layer) {
  const Window& w = layer.window;
  return fmt::format(" mode={} kernel={}x{} stride={}x{} pad={}x{}", layer.pool_mode == PoolMode::max ? "max" : "avg",
                     w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w) +
         (compact(layer) ? " backward=compact" : "");
}

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double e = task.element_bytes;
  const double x = elements(task.inputs.at(0), b) * e, y = elements(task.output, b) * e;
  const double places = compact(task.layer) ? static_cast<double>(elements(task.output, b)) : 0.0;
  if (task.kind == TaskKind::FP)
    return {streaming(x + y + places, 1,
                      elements(task.output, b) * task.layer.window.kernel_h * task.layer.window.kernel_w)};
  if (compact(task.layer)) return {streaming(2 * x + y + places)};  // zero dX; read places, dY; write dX
  if (task.layer.pool_mode == PoolMode::max) return {streaming(2 * x + 2 * y)};  // read X, Y, dY; write dX
  return {streaming(x + y)};                                                     // read dY; write dX
}

rt::PoolShape pool_shape(const OpTask& task, int64_t n) {
  const Shape& in = task.inputs.at(0);
  const Window& w = task.layer.window;
  rt::PoolShape s;
  s.n = n;
  s.c = in.dims.at(0);
  s.h = in.dims.at(1);
  s.w = in.dims.at(2);
  s.kernel_h = w.kernel_h;
  s.kernel_w = w.kernel_w;
  s.stride_h = w.stride_h;
  s.stride_w = w.stride_w;
  s.pad_h = w.pad_h;
  s.pad_w = w.pad_w;
  s.ceil_mode = task.layer.ceil_mode;
  return s;
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const rt::Arg shape = rt::Arg::of(pool_shape(task, ctx.samples));
  const bool max = task.layer.pool_mode == PoolMode::max;
  if (task.kind == TaskKind::FP && compact(task.layer)) {
    out.call(rt::Kernel::max_pool_forward_indices,
             {shape, out.tensor(TensorRole::input), out.tensor(TensorRole::output), out.tensor(TensorRole::saved)});
  } else if (task.kind == TaskKind::FP) {
    out.call(max ? rt::Kernel::max_pool_forward : rt::Kernel::avg_pool_forward,
             {shape, out.tensor(TensorRole::input), out.tensor(TensorRole::output)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    if (compact(task.layer))
      out.call(rt::Kernel::max_pool_backward_indices,
               {shape, out.tensor(TensorRole::saved), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::input_gradient, 0), flag(accumulates(ctx, 0))});
    else if (max)
      out.call(rt::Kernel::max_pool_backward,
               {shape, out.tensor(TensorRole::input), out.tensor(TensorRole::output), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::input_gradient, 0), flag(accumulates(ctx, 0))});
    else
      out.call(rt::Kernel::avg_pool_backward, {shape, out.tensor(TensorRole::gradient),
                                               out.tensor(TensorRole::input_gradient, 0), flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec pool_spec = {
    .op = Op::pool,
    .name = "pool",
    .fields = {"mode", "kernel", "stride", "pad", "ceil_mode"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .saved = saved,
    .bp1_needs = bp1_needs,
    .has_compact_backward = has_compact_backward,
    .paper_class = PaperClass::cheap,
    .signature = signature,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
