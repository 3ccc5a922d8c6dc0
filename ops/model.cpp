#include "ops/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

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

namespace {

// FNV-1a, 64 bits: simple, stable across platforms and runs.
struct Fnv1a {
  uint64_t hash = 1469598103934665603ull;
  void bytes(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash ^= p[i];
      hash *= 1099511628211ull;
    }
  }
  void text(const std::string& s) {
    int64_t n = static_cast<int64_t>(s.size());
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  void integer(int64_t v) { bytes(&v, sizeof v); }
  void real(double v) { bytes(&v, sizeof v); }
  void shape(const Shape& s) {
    integer(static_cast<int64_t>(s.dims.size()));
    for (int64_t d : s.dims) integer(d);
  }
};

}  // namespace

Status apply_precision(Model& model, Precision precision, bool replace) {
  const std::string mode = precision_name(precision);
  if (replace) model.math = "default";
  if (model.math != "default" && model.math != mode)
    return Error{{}, is_16_bit(precision)
                         ? "precision " + mode + " computes convolutions and GEMMs in " + mode + ", but math is '" +
                               model.math + "' (leave math out, or set it to default)"
                         : "precision " + mode + " contradicts math '" + model.math + "' (leave math out)"};
  model.precision = precision;
  model.math = mode;
  return Ok{};
}

std::string model_digest(const Model& model) {
  Fnv1a h;
  h.text(model.name);
  h.shape(model.input);
  h.integer(model.batch);
  h.integer(model.classes);
  h.text(model.dtype);
  // 16-bit tensors change what the model computes (fp32 and tf32 hash as before).
  if (is_16_bit(model.precision)) h.text(precision_name(model.precision));
  h.text(model.optimizer.kind);
  h.real(model.optimizer.lr);
  h.real(model.optimizer.momentum);
  h.real(model.optimizer.weight_decay);
  // Hashed only where set, so that the digests of models without them stay.
  if (model.optimizer.nesterov) h.text("nesterov");
  if (model.optimizer.no_decay_biases) h.text("no_decay_biases");
  if (model.optimizer.no_decay_norms) h.text("no_decay_norms");
  if (model.optimizer.adamw()) {
    h.real(model.optimizer.beta1);
    h.real(model.optimizer.beta2);
    h.real(model.optimizer.eps);
  }
  h.integer(static_cast<int64_t>(model.layers.size()));
  for (const Layer& l : model.layers) {
    h.text(l.name);
    h.integer(static_cast<int64_t>(l.op));
    h.integer(static_cast<int64_t>(l.inputs.size()));
    for (LayerId in : l.inputs) h.integer(in);
    h.shape(l.output);
    h.integer(l.out);
    h.integer(l.groups);
    h.integer(l.bias);
    const Window& w = l.window;
    for (int64_t v : {w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w}) h.integer(v);
    h.integer(static_cast<int64_t>(l.pool_mode));
    h.integer(l.ceil_mode);
    h.real(l.eps);
    h.real(l.momentum);
    h.integer(l.lrn_size);
    h.real(l.alpha);
    h.real(l.beta);
    h.real(l.k);
    h.real(l.p);
    // The fields of the ops imported from PyTorch models (docs/import.md).
    for (int64_t v : {w.dilation_h, w.dilation_w, static_cast<int64_t>(l.tanh_approximation), l.out_h, l.out_w, l.axis,
                      l.begin, l.end, static_cast<int64_t>(l.transpose_b), l.heads})
      h.integer(v);
    h.integer(static_cast<int64_t>(l.shape.size()));
    for (int64_t v : l.shape) h.integer(v);
    h.real(l.clip_min);
    h.real(l.clip_max);
    h.real(l.scale);
    if (l.label_smoothing != 0) h.real(l.label_smoothing);
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h.hash));
  return text;
}

}  // namespace mplan
