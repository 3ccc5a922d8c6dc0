#include "frontend/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mplan {

const char* op_name(Op op) {
  switch (op) {
    case Op::conv: return "conv";
    case Op::linear: return "linear";
    case Op::relu: return "relu";
    case Op::pool: return "pool";
    case Op::global_avgpool: return "global_avgpool";
    case Op::batchnorm: return "batchnorm";
    case Op::lrn: return "lrn";
    case Op::dropout: return "dropout";
    case Op::add: return "add";
    case Op::concat: return "concat";
    case Op::flatten: return "flatten";
    case Op::softmax_xent: return "softmax_xent";
  }
  return "unknown";
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

int64_t Model::parameter_count(LayerId l) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  const Layer& layer = layers[l];
  switch (layer.op) {
    case Op::conv: {
      int64_t in_channels = input_shape(l).dims.at(0);
      int64_t weights = layer.out * (in_channels / layer.groups) * layer.window.kernel_h *
                        layer.window.kernel_w;
      return weights + (layer.bias ? layer.out : 0);
    }
    case Op::linear: {
      int64_t in_features = input_shape(l).elements();
      return layer.out * in_features + (layer.bias ? layer.out : 0);
    }
    case Op::batchnorm:
      return 2 * input_shape(l).dims.at(0);  // gamma and beta per channel
    default:
      return 0;
  }
}

int64_t Model::parameter_count() const {
  int64_t total = 0;
  for (LayerId l = 0; l < static_cast<LayerId>(layers.size()); ++l) total += parameter_count(l);
  return total;
}

int64_t Model::buffer_count(LayerId l) const {
  MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(layers.size()), "layer id out of range");
  if (layers[l].op != Op::batchnorm) return 0;
  return 2 * input_shape(l).dims.at(0);  // running mean and running variance
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
