#pragma once
// Shape inference of one layer (docs/model-format.md, "Shapes"): the input
// count and the overall size limits here, each op's own rules in its entry of
// the op table (frontend/op_table.h).

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/model.h"
#include "frontend/op_table.h"

namespace mplan {

// The largest per-sample tensor (in elements) and the largest size field the
// frontend accepts; beyond them byte counts could overflow int64 later on.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;
inline constexpr int64_t kMaxSizeField = 2147483647;  // 2^31 - 1

// Whether every dimension is >= 1 and the product is at most kMaxElements
// (computed without overflow, unlike Shape::elements).
bool is_valid_size(const Shape& shape);

// Output of `layer` given the shapes of its inputs, in order, with the names
// of those inputs for messages; `classes` is the model's class count (the loss
// checks it). Checks the input count, the op's fields and the op's shape rules.
ShapeOrMessage infer_output_shape(const Layer& layer, const std::vector<Shape>& input_shapes,
                                  const std::vector<std::string>& input_names, int64_t classes);

}  // namespace mplan
