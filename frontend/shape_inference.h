#pragma once
// Per-op shape inference and the per-op rules of the format
// (docs/model-format.md, "Shapes"): one function from a layer and the shapes
// of its inputs to its output shape, or what is wrong.

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/model.h"

namespace mplan {

// The largest per-sample tensor (in elements) and the largest size field the
// frontend accepts; beyond them byte counts could overflow int64 later on.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;
inline constexpr int64_t kMaxSizeField = 2147483647;  // 2^31 - 1

// Whether every dimension is >= 1 and the product is at most kMaxElements
// (computed without overflow, unlike Shape::elements).
bool is_valid_size(const Shape& shape);

// Either the output shape or a message such as "kernel 7x7 is larger than its
// padded input 5x5" (without the layer's name or location: the caller adds them).
struct ShapeOrMessage {
  Shape shape;
  std::string error;  // empty when `shape` is valid
  bool ok() const { return error.empty(); }
};

// Output of `layer` given the shapes of its inputs, in order, with the names
// of those inputs for messages; `classes` is the model's class count (the loss
// checks it). Checks the input count, the op's fields and the op's shape rules.
ShapeOrMessage infer_output_shape(const Layer& layer, const std::vector<Shape>& input_shapes,
                                  const std::vector<std::string>& input_names, int64_t classes);

}  // namespace mplan
