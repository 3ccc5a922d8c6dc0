#include "frontend/shape_inference.h"

#include <fmt/format.h>

namespace mplan {
namespace {

ShapeOrMessage failure(std::string message) { return {{}, std::move(message)}; }

// Whether a weight tensor of these dimensions stays within kMaxElements, so
// that parameter counts (Model::parameter_count) cannot overflow.
bool weights_fit(std::initializer_list<int64_t> dims) {
  return is_valid_size(Shape{std::vector<int64_t>(dims)});
}

std::string describe_input(const std::vector<std::string>& names, size_t k) {
  return k < names.size() ? fmt::format("'{}'", names[k]) : fmt::format("#{}", k + 1);
}

// "must be at least 1, got 0" style check of one integer field; empty if fine.
std::string check_range(const char* field, int64_t value, int64_t low) {
  if (value < low)
    return fmt::format("{} must be at least {}, got {}", field, low, value);
  if (value > kMaxSizeField)
    return fmt::format("{} is {}, larger than the largest size accepted ({})", field, value,
                       kMaxSizeField);
  return {};
}

std::string check_window(const Window& w) {
  for (auto [field, value, low] : {std::tuple{"kernel", w.kernel_h, 1}, {"kernel", w.kernel_w, 1},
                                   {"stride", w.stride_h, 1}, {"stride", w.stride_w, 1},
                                   {"pad", w.pad_h, 0}, {"pad", w.pad_w, 0}}) {
    std::string why = check_range(field, value, low);
    if (!why.empty()) return why;
  }
  return {};
}

std::string pair_text(int64_t h, int64_t w) { return fmt::format("{}x{}", h, w); }

// One spatial dimension of a conv or pool output. Floor rule (PyTorch, cuDNN):
// out = floor((in + 2*pad - kernel) / stride) + 1. Ceil rule (pooling with
// ceil_mode, PyTorch's pooling_output_shape): ceil instead of floor, but the
// last window must start inside the input or the left padding.
int64_t window_output(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  int64_t span = in + 2 * pad - kernel;  // >= 0, checked by the caller
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Shared by conv and pool: the window must fit the padded input.
ShapeOrMessage spatial_output(const Layer& layer, const Shape& in, int64_t channels,
                              bool ceil_mode) {
  const Window& w = layer.window;
  int64_t padded_h = in.dims[1] + 2 * w.pad_h;
  int64_t padded_w = in.dims[2] + 2 * w.pad_w;
  if (w.kernel_h > padded_h || w.kernel_w > padded_w)
    return failure(fmt::format("kernel {} is larger than its padded input {}",
                               pair_text(w.kernel_h, w.kernel_w), pair_text(padded_h, padded_w)));
  return {Shape{{channels, window_output(in.dims[1], w.kernel_h, w.stride_h, w.pad_h, ceil_mode),
                 window_output(in.dims[2], w.kernel_w, w.stride_w, w.pad_w, ceil_mode)}},
          {}};
}

ShapeOrMessage infer_conv(const Layer& layer, const Shape& in) {
  for (const std::string& why : {check_range("out", layer.out, 1),
                                 check_range("groups", layer.groups, 1), check_window(layer.window)})
    if (!why.empty()) return failure(why);
  int64_t in_channels = in.dims[0];
  if (in_channels % layer.groups != 0)
    return failure(fmt::format("its {} input channels are not divisible by groups = {}",
                               in_channels, layer.groups));
  if (layer.out % layer.groups != 0)
    return failure(fmt::format("out = {} is not divisible by groups = {}", layer.out,
                               layer.groups));
  if (!weights_fit({layer.out, in_channels / layer.groups, layer.window.kernel_h,
                    layer.window.kernel_w}))
    return failure(fmt::format("its weights are too large (at most {} elements)", kMaxElements));
  return spatial_output(layer, in, layer.out, /*ceil_mode=*/false);
}

ShapeOrMessage infer_pool(const Layer& layer, const Shape& in) {
  const Window& w = layer.window;
  if (std::string why = check_window(w); !why.empty()) return failure(why);
  // PyTorch rejects pools whose padding exceeds half the kernel; the reference
  // checks run through PyTorch, so the format does too.
  if (2 * w.pad_h > w.kernel_h || 2 * w.pad_w > w.kernel_w)
    return failure(fmt::format("pad {} is more than half of kernel {}", pair_text(w.pad_h, w.pad_w),
                               pair_text(w.kernel_h, w.kernel_w)));
  return spatial_output(layer, in, in.dims[0], layer.ceil_mode);
}

std::string expected_input_count(const Layer& layer, size_t count) {
  bool is_join = layer.op == Op::add || layer.op == Op::concat;
  if (layer.op == Op::add && count < 2)
    return fmt::format("{} needs at least 2 inputs (in: [a, b, ...]), got {}", op_name(layer.op),
                       count);
  // A concat of one input is the identity: torchvision's DenseNet and ONNX's
  // Concat have it (issue 12).
  if (layer.op == Op::concat && count < 1)
    return fmt::format("concat needs at least 1 input (in: [a, b, ...]), got {}", count);
  if (!is_join && count != 1)
    return fmt::format("{} takes exactly 1 input, got {}", op_name(layer.op), count);
  return {};
}

ShapeOrMessage infer_unchecked_size(const Layer& layer, const std::vector<Shape>& in,
                                    const std::vector<std::string>& names, int64_t classes) {
  const Shape& first = in[0];
  auto need_rank = [&](size_t rank, const char* form) -> std::string {
    if (first.dims.size() == rank) return {};
    std::string hint = layer.op == Op::linear ? "; add {op: flatten} before it" : "";
    return fmt::format("{} needs a {} input but its input {} is {}{}", op_name(layer.op), form,
                       describe_input(names, 0), first.to_string(), hint);
  };
  switch (layer.op) {
    case Op::conv:
      if (auto why = need_rank(3, "[C, H, W]"); !why.empty()) return failure(why);
      return infer_conv(layer, first);
    case Op::pool:
      if (auto why = need_rank(3, "[C, H, W]"); !why.empty()) return failure(why);
      return infer_pool(layer, first);
    case Op::global_avgpool:
      if (auto why = need_rank(3, "[C, H, W]"); !why.empty()) return failure(why);
      return {Shape{{first.dims[0], 1, 1}}, {}};
    case Op::lrn:
      if (auto why = need_rank(3, "[C, H, W]"); !why.empty()) return failure(why);
      if (auto why = check_range("size", layer.lrn_size, 1); !why.empty()) return failure(why);
      return {first, {}};
    case Op::linear:
      if (auto why = need_rank(1, "1-D [N]"); !why.empty()) return failure(why);
      if (auto why = check_range("out", layer.out, 1); !why.empty()) return failure(why);
      if (!weights_fit({layer.out, first.dims[0]}))
        return failure(fmt::format("its weights are too large (at most {} elements)", kMaxElements));
      return {Shape{{layer.out}}, {}};
    case Op::batchnorm:
      if (first.dims.size() != 3 && first.dims.size() != 1)
        return failure(fmt::format("batchnorm needs a [C, H, W] or [N] input but its input {} is {}",
                                   describe_input(names, 0), first.to_string()));
      if (!(layer.eps > 0)) return failure(fmt::format("eps must be positive, got {}", layer.eps));
      if (!(layer.momentum >= 0 && layer.momentum <= 1))
        return failure(fmt::format("momentum must be in [0, 1], got {}", layer.momentum));
      return {first, {}};
    case Op::dropout:
      if (!(layer.p >= 0 && layer.p < 1))
        return failure(fmt::format("p must be in [0, 1), got {}", layer.p));
      return {first, {}};
    case Op::relu:
      return {first, {}};
    case Op::flatten:
      return {Shape{{first.elements()}}, {}};
    case Op::add:
      for (size_t k = 1; k < in.size(); ++k)
        if (in[k] != first)
          return failure(fmt::format("add needs inputs of the same shape, but {} is {} and {} is {}",
                                     describe_input(names, 0), first.to_string(),
                                     describe_input(names, k), in[k].to_string()));
      return {first, {}};
    case Op::concat: {
      Shape out = first;
      for (size_t k = 1; k < in.size(); ++k) {
        bool same_rest = in[k].dims.size() == first.dims.size();
        for (size_t d = 1; same_rest && d < first.dims.size(); ++d)
          same_rest = in[k].dims[d] == first.dims[d];
        if (!same_rest)
          return failure(fmt::format(
              "concat joins along the channel axis, so its inputs must agree in every other "
              "dimension, but {} is {} and {} is {}",
              describe_input(names, 0), first.to_string(), describe_input(names, k),
              in[k].to_string()));
        out.dims[0] += in[k].dims[0];  // each <= kMaxElements: no overflow for sane counts
        if (out.dims[0] > kMaxElements)
          return failure("the concatenated channel count is too large");
      }
      return {out, {}};
    }
    case Op::softmax_xent:
      if (first != Shape{{classes}})
        return failure(fmt::format("the loss needs an input of shape [{}] (the model's classes) "
                                   "but its input {} is {}",
                                   classes, describe_input(names, 0), first.to_string()));
      return {first, {}};
  }
  return failure("unknown op");
}

}  // namespace

bool is_valid_size(const Shape& shape) {
  int64_t elements = 1;
  for (int64_t d : shape.dims)
    if (d < 1 || __builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements)
      return false;
  return true;
}

ShapeOrMessage infer_output_shape(const Layer& layer, const std::vector<Shape>& input_shapes,
                                  const std::vector<std::string>& input_names, int64_t classes) {
  if (std::string why = expected_input_count(layer, input_shapes.size()); !why.empty())
    return failure(why);
  ShapeOrMessage result = infer_unchecked_size(layer, input_shapes, input_names, classes);
  if (!result.ok()) return result;
  if (!is_valid_size(result.shape))
    return failure(fmt::format("its output {} is too large (at most {} elements per sample)",
                               result.shape.to_string(), kMaxElements));
  return result;
}

}  // namespace mplan
