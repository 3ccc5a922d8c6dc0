#pragma once
// Shape inference of one layer (docs/model-format.md, "Shapes"): the input
// count and the overall size limits here, each op's own rules in its entry of
// the op table (ops/op_table.h).

#include <cstdint>
#include <string>
#include <vector>

#include "core/limits.h"
#include "ops/model.h"
#include "ops/op_table.h"

namespace mplan {

// Output of `layer` given the shapes of its inputs, in order, with the names
// of those inputs for messages; `classes` is the model's class count (the loss
// checks it). Checks the input count, the op's fields and the op's shape rules.
ShapeOrMessage infer_output_shape(const Layer& layer, const std::vector<Shape>& input_shapes,
                                  const std::vector<std::string>& input_names, int64_t classes);

}  // namespace mplan
