#include "ops/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op_table.h"

namespace mplan {

bool is_valid_size(const Shape& shape) {
  int64_t elements = 1;
  for (int64_t d : shape.dims)
    if (d < 1 || __builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements) return false;
  return true;
}

int64_t Shape::elements() const {
  int64_t product = 1;
  for (int64_t d : dims)
    MPLAN_CHECK(!__builtin_mul_overflow(product, d, &product), "shape elements overflow int64");
  return product;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims, ", ")); }

const Shape& Model::input_shape(LayerId l, int k) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  const Layer& layer = layers[l];
  MPLAN_CHECK(k >= 0 && k < static_cast<int>(layer.inputs.size()), "input index out of range");
  LayerId from = layer.inputs[k];
  if (from == kModelInput) return input;
  MPLAN_CHECK(from >= 0 && from < l, "a layer's input must be an earlier layer");
  return layers[from].output;
}

std::vector<Shape> Model::input_shapes(LayerId l) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  std::vector<Shape> shapes;
  for (int k = 0; k < static_cast<int>(layers[l].inputs.size()); ++k) shapes.push_back(input_shape(l, k));
  return shapes;
}

int64_t Model::parameter_count(LayerId l) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  return layer_parameter_count(layers[l], input_shapes(l));
}

int64_t Model::parameter_count() const {
  int64_t total = 0;
  for (LayerId l = 0; l < static_cast<LayerId>(layers.size()); ++l) total += parameter_count(l);
  return total;
}

int64_t Model::buffer_count(LayerId l) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  return layer_buffer_count(layers[l], input_shapes(l));
}

LayerId Model::find(const std::string& name) const {
  for (LayerId l = 0; l < static_cast<LayerId>(layers.size()); ++l)
    if (layers[l].name == name) return l;
  // A block instance ("layer1") or one repetition of it ("layer1.0") is no
  // layer, but names its output as `in:` does: its layers are contiguous and
  // named "<instance>.<...>", so its output is the last of them.
  const std::string prefix = name + ".";
  for (LayerId l = static_cast<LayerId>(layers.size()) - 1; l >= 0; --l)
    if (layers[l].name.compare(0, prefix.size(), prefix) == 0) return l;
  return -1;
}

}  // namespace mplan
