#include "ops/op_helpers.h"

namespace mplan::ops {

std::string check_range(const char* field, int64_t value, int64_t low) {
  if (value < low) return fmt::format("{} must be at least {}, got {}", field, low, value);
  if (value > kMaxSizeField)
    return fmt::format("{} is {}, larger than the largest size accepted ({})", field, value, kMaxSizeField);
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

std::string need_rank(const Layer& layer, const ShapeInputs& in, size_t rank, const char* form) {
  const Shape& first = in.shapes.at(0);
  if (first.dims.size() == rank) return {};
  const std::string hint = layer.op == Op::linear ? "; add {op: flatten} before it" : "";
  return fmt::format("{} needs a {} input but its input {} is {}{}", op_name(layer.op), form, describe_input(in, 0),
                     first.to_string(), hint);
}

bool fits_elements(std::initializer_list<int64_t> dims) { return is_valid_size(Shape{std::vector<int64_t>(dims)}); }

int64_t window_output(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;  // >= 0, checked by the caller
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

ShapeOrMessage spatial_output(const Window& w, const Shape& in, int64_t channels, bool ceil_mode) {
  const int64_t padded_h = in.dims[1] + 2 * w.pad_h;
  const int64_t padded_w = in.dims[2] + 2 * w.pad_w;
  if (w.kernel_h > padded_h || w.kernel_w > padded_w)
    return failure(fmt::format("kernel {}x{} is larger than its padded input {}x{}", w.kernel_h, w.kernel_w,
                               padded_h, padded_w));
  return {Shape{{channels, window_output(in.dims[1], w.kernel_h, w.stride_h, w.pad_h, ceil_mode),
                 window_output(in.dims[2], w.kernel_w, w.stride_w, w.pad_w, ceil_mode)}},
          {}};
}

std::pair<int64_t, int64_t> channels_and_hw(const Shape& s) {
  int64_t hw = 1;
  for (size_t i = 1; i < s.dims.size(); ++i) hw *= s.dims[i];
  return {s.dims.at(0), hw};
}

}  // namespace mplan::ops
