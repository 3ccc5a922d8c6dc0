#include "frontend/shape_inference.h"

#include <fmt/format.h>

namespace mplan {
namespace {

std::string expected_input_count(const OpSpec& spec, size_t count) {
  const size_t low = static_cast<size_t>(spec.min_inputs);
  if (spec.max_inputs == 1 && low == 1 && count != 1)
    return fmt::format("{} takes exactly 1 input, got {}", spec.name, count);
  if (count < low)
    return fmt::format("{} needs at least {} inputs (in: [a, b, ...]), got {}", spec.name, low, count);
  if (spec.max_inputs >= 0 && count > static_cast<size_t>(spec.max_inputs))
    return fmt::format("{} takes at most {} inputs, got {}", spec.name, spec.max_inputs, count);
  return {};
}

}  // namespace

ShapeOrMessage infer_output_shape(const Layer& layer, const std::vector<Shape>& input_shapes,
                                  const std::vector<std::string>& input_names, int64_t classes) {
  const OpSpec& spec = op_spec(layer.op);
  if (std::string why = expected_input_count(spec, input_shapes.size()); !why.empty()) return {{}, why};
  ShapeOrMessage result = spec.infer_shape(layer, ShapeInputs{input_shapes, input_names, classes});
  if (!result.ok()) return result;
  if (!is_valid_size(result.shape))
    return {{},
            fmt::format("its output {} is too large (at most {} elements per sample)", result.shape.to_string(),
                        kMaxElements)};
  return result;
}

}  // namespace mplan
