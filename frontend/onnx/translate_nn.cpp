// The importer's network nodes: convolutions, normalisations, pooling,
// activations (with the element-wise patterns PyTorch writes SiLU and GELU
// as), linear layers (MatMul and Gemm with a parameter, and their bias Add),
// additions and products, softmax, and PyTorch's multi-head attention (its
// MatMul, Softmax, MatMul over the heads) as one attention layer.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "frontend/onnx/translator.h"

namespace mplan::onnx_import {
namespace {

int64_t attribute_int(const Node& node, const std::string& key, int64_t fallback) {
  const Attribute* a = node.attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::integer ? a->integer : fallback;
}

double attribute_real(const Node& node, const std::string& key, double fallback) {
  const Attribute* a = node.attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::real ? a->real : fallback;
}

std::vector<int64_t> attribute_ints(const Node& node, const std::string& key, std::vector<int64_t> fallback) {
  const Attribute* a = node.attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::integers ? a->integers : fallback;
}

// "3" for 3x3, "[3, 5]" otherwise.
std::string pair_text(int64_t h, int64_t w) { return h == w ? std::to_string(h) : fmt::format("[{}, {}]", h, w); }

std::string real_text(double v) { return fmt::format("{}", v); }

bool near(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b)); }

// Sizes of a hostile file stay where arithmetic on them cannot overflow.
bool sizes_in_range(const std::vector<int64_t>& values, int64_t low) {
  for (int64_t v : values)
    if (v < low || v > 2147483647) return false;
  return true;
}

int64_t elements(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

}  // namespace

// ---- dispatch --------------------------------------------------------------------------------------

void Translator::translate(const Node& node) {
  using Handler = void (Translator::*)(const Node&);
  static const std::map<std::string, Handler> handlers = {
      {"Conv", &Translator::translate_conv},
      {"BatchNormalization", &Translator::translate_batchnorm},
      {"MaxPool", &Translator::translate_pool},
      {"AveragePool", &Translator::translate_pool},
      {"GlobalAveragePool", &Translator::translate_global_pool},
      {"ReduceMean", &Translator::translate_reduce_mean},
      {"Relu", &Translator::translate_activation},
      {"Sigmoid", &Translator::translate_activation},
      {"HardSigmoid", &Translator::translate_activation},
      {"HardSwish", &Translator::translate_activation},
      {"Clip", &Translator::translate_activation},
      {"Erf", &Translator::translate_activation},
      {"Gelu", &Translator::translate_activation},
      {"Tanh", &Translator::translate_activation},
      {"Pow", &Translator::translate_activation},
      {"MatMul", &Translator::translate_matmul},
      {"Gemm", &Translator::translate_gemm},
      {"Add", &Translator::translate_add},
      {"Mul", &Translator::translate_mul},
      {"Div", &Translator::translate_div},
      {"Softmax", &Translator::translate_softmax},
      {"LayerNormalization", &Translator::translate_layernorm},
      {"Concat", &Translator::translate_concat},
      {"Slice", &Translator::translate_slice},
      {"Split", &Translator::translate_split},
      {"Gather", &Translator::translate_gather},
      {"Reshape", &Translator::translate_view_op},
      {"Flatten", &Translator::translate_view_op},
      {"Transpose", &Translator::translate_view_op},
      {"Unsqueeze", &Translator::translate_view_op},
      {"Squeeze", &Translator::translate_view_op},
      {"Dropout", &Translator::translate_dropout},
      {"Pad", &Translator::translate_pad},
      {"Expand", &Translator::translate_expand},
  };
  // Ops that only do the graph's shape arithmetic, on constants.
  static const std::vector<std::string> constant_only = {"Constant", "Shape", "ConstantOfShape", "Cast", "Equal",
                                                         "Where",    "Neg",   "Sqrt",            "Sub",  "Identity"};
  for (const std::string& in : node.inputs)
    if (!in.empty() && values_.count(in) == 0)
      return refuse(node, fmt::format("its input '{}' is not made by any node, initializer or graph input with a "
                                      "shape (an output the importer does not model, such as batch norm's "
                                      "running statistics?)",
                                      in));
  if (!node.domain.empty() && node.domain != "ai.onnx")
    return refuse(node, fmt::format("an op of the domain '{}'; mplan imports the standard ONNX ops only", node.domain));
  auto handler = handlers.find(node.op_type);
  const bool known = handler != handlers.end() ||
                     std::find(constant_only.begin(), constant_only.end(), node.op_type) != constant_only.end();
  if (!known) return refuse(node, fmt::format("mplan has no layer for the ONNX op {} (docs/import.md lists the ops)",
                                              node.op_type));
  if (has_unknown_input(node)) {  // an earlier node was refused: that is the problem to report
    for (const std::string& out : node.outputs) define(out, Value{});
    return;
  }
  // The inputs each op needs at least (ONNX's schemas); a damaged file may lack them.
  static const std::map<std::string, size_t> least_inputs = {
      {"Conv", 2},   {"BatchNormalization", 5}, {"MatMul", 2}, {"Gemm", 2},  {"Add", 2},    {"Mul", 2},
      {"Div", 2},    {"Sub", 2},                {"Pow", 2},    {"Equal", 2}, {"Where", 3},  {"Gather", 2},
      {"Expand", 2}, {"LayerNormalization", 2}, {"Reshape", 2}};
  const auto least = least_inputs.find(node.op_type);
  if (node.outputs.empty() || node.outputs[0].empty() || node.inputs.empty() ||
      (least != least_inputs.end() && node.inputs.size() < least->second)) {
    if (node.op_type != "Constant" || node.outputs.empty())
      return refuse(node, "a node without the inputs or outputs its op has (a damaged file?)");
  }
  try {
    if (node.op_type == "Identity" && value(node.inputs.at(0)).kind != Value::Kind::constant)
      return define(node.outputs.at(0), value(node.inputs.at(0)));
    if (translate_constant(node)) return;
    if (handler == handlers.end())
      return refuse(node, fmt::format("{} is imported on constants only (shape arithmetic); here it is applied to a "
                                      "tensor",
                                      node.op_type));
    (this->*handler->second)(node);
  } catch (const std::out_of_range&) {  // an input, output or axis a damaged node lacks
    refuse(node, "a node without the inputs, outputs or sizes its op has (a damaged file?)");
  }
}

// ---- convolution, normalisation, pooling --------------------------------------------------------

void Translator::translate_conv(const Node& node) {
  const Value& w = value(node.inputs.at(1));
  if (w.kind != Value::Kind::param || w.dims.size() != 4)
    return refuse(node, "a convolution whose weight is not a 4-D parameter (mplan has 2-D convolutions)");
  const Value* b = node.inputs.size() > 2 && !node.inputs[2].empty() ? &value(node.inputs[2]) : nullptr;
  if (b != nullptr && (b->kind != Value::Kind::param || b->dims != std::vector<int64_t>{w.dims[0]}))
    return refuse(node, "a convolution whose bias is not a parameter of one value per output channel");
  if (const Attribute* a = node.attribute("auto_pad"); a != nullptr && a->text != "NOTSET" && a->text != "VALID")
    return refuse(node, "auto_pad SAME_*: export with explicit padding");
  const auto strides = attribute_ints(node, "strides", {1, 1});
  const auto dilations = attribute_ints(node, "dilations", {1, 1});
  auto pads = attribute_ints(node, "pads", {0, 0, 0, 0});
  const auto kernel = attribute_ints(node, "kernel_shape", {w.dims[2], w.dims[3]});
  const int64_t groups = attribute_int(node, "group", 1);
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || kernel.size() != 2)
    return refuse(node, "a convolution that is not 2-D");
  if (!sizes_in_range(strides, 1) || !sizes_in_range(dilations, 1) || !sizes_in_range(pads, 0) ||
      !sizes_in_range(w.dims, 1))
    return refuse(node, "sizes out of range (strides, dilations and the weight's sizes from 1, pads from 0, all "
                        "below 2^31)");
  if (kernel[0] != w.dims[2] || kernel[1] != w.dims[3]) return refuse(node, "kernel_shape differs from the weight's");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    return refuse(node, "padding that differs between the two sides of an axis (mplan pads both alike)");
  std::string x_name = node.inputs.at(0);
  const Value& x_value = value(x_name);
  if (x_value.kind == Value::Kind::pending && x_value.pending.kind == Pending::Kind::padded) {
    pads[0] += x_value.pending.pad_h;
    pads[1] += x_value.pending.pad_w;
    x_name = x_value.pending.x;
  }
  auto x = plain(x_name, node, 4);
  if (!x) return;
  const auto& in = base_dims(x->base);
  if (groups < 1 || in[0] != w.dims[1] * groups)
    return refuse(node, fmt::format("its input has {} channels, its weight {} x {} groups", in[0], w.dims[1], groups));
  std::vector<std::pair<std::string, std::string>> fields{{"out", std::to_string(w.dims[0])},
                                                          {"kernel", pair_text(kernel[0], kernel[1])}};
  if (strides[0] != 1 || strides[1] != 1) fields.emplace_back("stride", pair_text(strides[0], strides[1]));
  if (pads[0] != 0 || pads[1] != 0) fields.emplace_back("pad", pair_text(pads[0], pads[1]));
  if (dilations[0] != 1 || dilations[1] != 1) fields.emplace_back("dilation", pair_text(dilations[0], dilations[1]));
  if (groups != 1) fields.emplace_back("groups", std::to_string(groups));
  if (b == nullptr) fields.emplace_back("bias", "false");
  const int layer = emit(node.name, "conv", {x->base}, fields);
  OutLayer& l = layers_[static_cast<size_t>(layer)];
  l.params.push_back(w.param);
  if (b != nullptr) l.params.push_back(b->param);
  auto out_size = [&](int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (size + 2 * p - d * (k - 1) - 1) / s + 1;
  };
  const int64_t p = out_size(in[1], kernel[0], strides[0], pads[0], dilations[0]);
  const int64_t q = out_size(in[2], kernel[1], strides[1], pads[1], dilations[1]);
  if (p < 1 || q < 1 || strides[0] < 1 || strides[1] < 1)
    return refuse(node, "a convolution whose kernel does not fit its padded input");
  define(node.outputs.at(0), new_tensor(layer, {w.dims[0], p, q}));
}

void Translator::translate_batchnorm(const Node& node) {
  if (node.inputs.size() < 5) return refuse(node, "a batch norm without its four parameters");
  for (size_t k = 1; k < 5; ++k)
    if (value(node.inputs[k]).kind != Value::Kind::param)
      return refuse(node, "a batch norm whose scale, bias, mean or variance is not a parameter");
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  const size_t rank = x->view.rank();
  if (rank != 4 && rank != 2) return refuse(node, "a batch norm of other than [N, C, H, W] or [N, C]");
  x = plain(node.inputs.at(0), node, rank);
  if (!x) return;
  const int64_t channels = base_dims(x->base).at(0);
  if (value(node.inputs[1]).elements() != channels) return refuse(node, "a scale of another size than the channels");
  std::vector<std::pair<std::string, std::string>> fields;
  const double eps = attribute_real(node, "epsilon", 1e-5);
  // ONNX's running = momentum * running + (1 - momentum) * batch: PyTorch's momentum is 1 minus it.
  const double momentum = 1.0 - attribute_real(node, "momentum", 0.9);
  if (!near(eps, 1e-5)) fields.emplace_back("eps", fmt::format("{}", static_cast<float>(eps)));
  if (!near(momentum, 0.1)) fields.emplace_back("momentum", real_text(std::round(momentum * 1e6) / 1e6));
  const int layer = emit(node.name, "batchnorm", {x->base}, fields);
  layers_[static_cast<size_t>(layer)].params = {value(node.inputs[1]).param, value(node.inputs[2]).param};
  define(node.outputs.at(0), tensor_like(layer, *x));
}

void Translator::translate_pool(const Node& node) {
  const bool max = node.op_type == "MaxPool";
  const auto kernel = attribute_ints(node, "kernel_shape", {});
  const auto strides = attribute_ints(node, "strides", {1, 1});
  auto pads = attribute_ints(node, "pads", {0, 0, 0, 0});
  const auto dilations = attribute_ints(node, "dilations", {1, 1});
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4) return refuse(node, "a pooling that is not 2-D");
  if (!sizes_in_range(kernel, 1) || !sizes_in_range(strides, 1) || !sizes_in_range(pads, 0))
    return refuse(node, "sizes out of range (kernel and strides from 1, pads from 0, all below 2^31)");
  if (dilations != std::vector<int64_t>{1, 1}) return refuse(node, "a dilated pooling");
  if (const Attribute* a = node.attribute("auto_pad"); a != nullptr && a->text != "NOTSET" && a->text != "VALID")
    return refuse(node, "auto_pad SAME_*: export with explicit padding");
  if (pads[0] != pads[2] || pads[1] != pads[3]) return refuse(node, "padding that differs between the sides");
  if (node.outputs.size() > 1 && consumers(node.outputs[1]) > 0) return refuse(node, "max pooling's indices are used");
  if (!max && (pads[0] > 0 || pads[1] > 0) && attribute_int(node, "count_include_pad", 0) == 0)
    return refuse(node, "an average pooling that leaves the padding out of its count (count_include_pad = 0); "
                        "mplan counts it, as PyTorch's default");
  std::string x_name = node.inputs.at(0);
  const Value& x_value = value(x_name);
  if (x_value.kind == Value::Kind::pending && x_value.pending.kind == Pending::Kind::padded) {
    if (max) return refuse(node, "a max pooling after a zero padding");
    pads[0] += x_value.pending.pad_h;
    pads[1] += x_value.pending.pad_w;
    x_name = x_value.pending.x;
  }
  auto x = plain(x_name, node, 4);
  if (!x) return;
  const bool ceil_mode = attribute_int(node, "ceil_mode", 0) != 0;
  std::vector<std::pair<std::string, std::string>> fields{{"mode", max ? "max" : "avg"},
                                                          {"kernel", pair_text(kernel[0], kernel[1])}};
  if (strides[0] != kernel[0] || strides[1] != kernel[1]) fields.emplace_back("stride", pair_text(strides[0], strides[1]));
  if (pads[0] != 0 || pads[1] != 0) fields.emplace_back("pad", pair_text(pads[0], pads[1]));
  if (ceil_mode) fields.emplace_back("ceil_mode", "true");
  const auto& in = base_dims(x->base);
  auto out_size = [&](int64_t size, int64_t k, int64_t s, int64_t p) {
    const int64_t span = size + 2 * p - k;
    if (span < 0 || s < 1) return int64_t{0};
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= size + p) --out;
    return out;
  };
  const int64_t p = out_size(in[1], kernel[0], strides[0], pads[0]), q = out_size(in[2], kernel[1], strides[1], pads[1]);
  if (p < 1 || q < 1) return refuse(node, "a pooling window larger than its padded input");
  define(node.outputs.at(0), new_tensor(emit(node.name, "pool", {x->base}, fields), {in[0], p, q}));
}

void Translator::translate_global_pool(const Node& node) {
  auto x = plain(node.inputs.at(0), node, 4);
  if (!x) return;
  define(node.outputs.at(0),
         new_tensor(emit(node.name, "global_avgpool", {x->base}), {base_dims(x->base).at(0), 1, 1}));
}

void Translator::translate_reduce_mean(const Node& node) {
  // The mean over H and W of [N, C, H, W]: a global average pooling.
  std::vector<int64_t> axes = attribute_ints(node, "axes", {});
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    auto given = numbers_of(node.inputs[1]);
    if (!given) return refuse(node, "axes that are not constant");
    axes = *given;
  }
  for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<int64_t>{2, 3})
    return refuse(node, "a mean over other axes than H and W of [N, C, H, W] (a layer norm exported before opset "
                        "17? export with opset_version=17 for LayerNormalization)");
  auto x = plain(node.inputs.at(0), node, 4);
  if (!x) return;
  Value out = new_tensor(emit(node.name, "global_avgpool", {x->base}), {base_dims(x->base).at(0), 1, 1});
  if (attribute_int(node, "keepdims", 1) == 0) out.tensor.view.reshape({Dim{1, true}, Dim{base_dims(x->base)[0], false}});
  define(node.outputs.at(0), out);
}

void Translator::translate_layernorm(const Node& node) {
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  const int64_t rank = static_cast<int64_t>(x->view.rank());
  int64_t axis = attribute_int(node, "axis", -1);
  axis = axis < 0 ? axis + rank : axis;
  if (axis != rank - 1) return refuse(node, "a layer norm over more than the last axis");
  const int base_axis = x->view.whole_base_axis(axis);
  const auto& dims = base_dims(x->base);
  const bool channels = dims.size() == 3 && base_axis == 1;            // ConvNeXt's, channels last
  const bool features = dims.size() <= 2 && base_axis == static_cast<int>(dims.size());  // ViT's
  if (!channels && !features)
    return refuse(node, fmt::format("a layer norm over the last axis of {}, which is neither the channels of "
                                    "feature maps nor the features of a sequence",
                                    x->view.to_string()));
  const int64_t size = dims.at(static_cast<size_t>(base_axis - 1));
  const Value& scale = value(node.inputs.at(1));
  const Value* bias = node.inputs.size() > 2 && !node.inputs[2].empty() ? &value(node.inputs[2]) : nullptr;
  if (scale.kind != Value::Kind::param || scale.elements() != size || bias == nullptr ||
      bias->kind != Value::Kind::param || bias->elements() != size)
    return refuse(node, "a layer norm whose scale and bias are not parameters of the normalised axis's size");
  std::vector<std::pair<std::string, std::string>> fields;
  const double eps = attribute_real(node, "epsilon", 1e-5);
  if (!near(eps, 1e-5)) fields.emplace_back("eps", fmt::format("{}", static_cast<float>(eps)));
  const int layer = emit(node.name, "layernorm", {x->base}, fields);
  layers_[static_cast<size_t>(layer)].params = {scale.param, bias->param};
  define(node.outputs.at(0), tensor_like(layer, *x));
}

// ---- activations -------------------------------------------------------------------------------

void Translator::translate_activation(const Node& node) {
  const std::string& op = node.op_type;
  const std::string& in = node.inputs.at(0);
  const std::string& out = node.outputs.at(0);
  auto pending = [&](Pending::Kind kind, const std::string& x) {
    Value v;
    v.kind = Value::Kind::pending;
    v.pending.kind = kind;
    v.pending.x = x;
    v.pending.node = node.name;
    define(out, v);
  };
  if (op == "Erf") {  // GELU's erf(x / sqrt 2)
    const Value& x = value(in);
    if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::scaled &&
        std::fabs(x.pending.factor - M_SQRT1_2) < 1e-5)
      return pending(Pending::Kind::erf_half, x.pending.x);
    return refuse(node, "an erf that is not part of GELU's x * 0.5 * (1 + erf(x / sqrt(2)))");
  }
  // GELU's tanh form: tanh(sqrt(2/pi) * (x + 0.044715 x^3)), and x^3 as Pow.
  if (op == "Tanh") {
    const Value& arg = value(in);
    if (arg.kind == Value::Kind::pending && arg.pending.kind == Pending::Kind::scaled &&
        std::fabs(arg.pending.factor - 0.7978845608028654) < 1e-5) {
      const Value& inner = value(arg.pending.x);
      if (inner.kind == Value::Kind::pending && inner.pending.kind == Pending::Kind::cubic &&
          std::fabs(inner.pending.factor - 0.044715) < 1e-6)
        return pending(Pending::Kind::tanh_of, inner.pending.x);
    }
    return refuse(node, "a tanh that is not part of GELU's tanh form");
  }
  if (op == "Pow") {
    auto exponent = scalar_of(node.inputs.at(1));
    if (exponent && *exponent == 3.0 && value(in).kind == Value::Kind::tensor) return pending(Pending::Kind::cube, in);
    return refuse(node, "a power that is not the cube of GELU's tanh form");
  }
  if (op == "Sigmoid") return pending(Pending::Kind::sigmoid_of, in);
  if (op == "HardSigmoid") {
    if (!near(attribute_real(node, "alpha", 0.2), 1.0 / 6) || !near(attribute_real(node, "beta", 0.5), 0.5))
      return refuse(node, "a hard sigmoid other than PyTorch's relu6(x + 3) / 6 (alpha 1/6, beta 0.5)");
    return pending(Pending::Kind::hardsigmoid_of, in);
  }
  auto x = tensor(in, node);
  if (!x) return;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string mplan_op;
  if (op == "Relu") {
    mplan_op = "relu";
  } else if (op == "HardSwish") {
    mplan_op = "hardswish";
  } else if (op == "Gelu") {
    mplan_op = "gelu";
    if (const Attribute* a = node.attribute("approximate"); a != nullptr && a->text == "tanh")
      fields.emplace_back("approximate", "tanh");
  } else {  // Clip: min and max as inputs (opset 11+) or attributes
    auto bound = [&](size_t index, const char* key) -> std::optional<double> {
      if (node.inputs.size() > index && !node.inputs[index].empty()) return scalar_of(node.inputs[index]);
      if (const Attribute* a = node.attribute(key)) return a->real;
      return std::nullopt;
    };
    auto low = bound(1, "min"), high = bound(2, "max");
    if (!low || !high || !(*low < *high)) return refuse(node, "a clip without a constant min and max (min < max)");
    mplan_op = "clip";
    fields = {{"min", real_text(*low)}, {"max", real_text(*high)}};
  }
  define(out, tensor_like(emit(node.name, mplan_op, {x->base}, fields), *x));
}

// ---- linear layers ------------------------------------------------------------------------------

std::optional<Value> Translator::linear(const Node& node, const std::string& x_name, const Value& weight,
                                        const Value* bias) {
  if (weight.kind != Value::Kind::param || weight.dims.size() != 2) {
    refuse(node, "a matrix product with a parameter that is not a matrix");
    return std::nullopt;
  }
  const int64_t in = weight.dims[0], out = weight.dims[1];  // as multiplied: x (.., in) @ W (in, out)
  auto x = tensor(x_name, node);
  if (!x) return std::nullopt;
  int64_t last = static_cast<int64_t>(x->view.rank()) - 1;
  int axis = x->view.whole_base_axis(last);
  // Pooled feature maps [C, 1, 1] flattened (a classifier): a reshape to [C]
  // and a linear layer, rather than a 1x1 conv over one pixel.
  const auto& in_dims = base_dims(x->base);
  const bool one_pixel = in_dims.size() == 3 && in_dims[1] == 1 && in_dims[2] == 1;
  if (axis == 0 || (one_pixel && axis == 1 && !x->view.is_plain() && x->view.is_reshaped_plain())) {
    x = plain(x_name, node);
    if (!x) return std::nullopt;
    last = static_cast<int64_t>(x->view.rank()) - 1;
    axis = x->view.whole_base_axis(last);
  }
  const auto& dims = base_dims(x->base);
  if (axis == 0 || dims.at(static_cast<size_t>(axis - 1)) != in) {
    refuse(node, fmt::format("a matrix product of {} with a ({}, {}) parameter", x->view.to_string(), in, out));
    return std::nullopt;
  }
  if (bias != nullptr && (bias->kind != Value::Kind::param || bias->elements() != out)) {
    refuse(node, "a bias that is not a parameter of the output's size");
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> fields{{"out", std::to_string(out)}};
  std::string op = "linear";
  if (dims.size() == 3 && axis == 1) {  // over the channels of feature maps (ConvNeXt's channels-last MLP)
    op = "conv";
    fields.emplace_back("kernel", "1");
  } else if (axis != static_cast<int>(dims.size()) || dims.size() > 2) {
    refuse(node, fmt::format("a matrix product over axis {} of {}", axis, x->view.to_string()));
    return std::nullopt;
  }
  if (bias == nullptr) fields.emplace_back("bias", "false");
  const std::string note =
      (op == "conv" ? "a linear layer over the channels of feature maps" : std::string()) +
      (weight.transposed ? "" : std::string(op == "conv" ? "; " : "") + "its ONNX weight is stored (in, out)");
  const int layer = emit(node.name, op, {x->base}, fields, note);
  OutLayer& l = layers_[static_cast<size_t>(layer)];
  l.params.push_back(weight.param);
  if (bias != nullptr) l.params.push_back(bias->param);
  l.bias_foldable = bias == nullptr;
  l.out_features = out;
  l.feature_axis = axis;
  std::vector<int64_t> out_dims = dims;
  out_dims[static_cast<size_t>(axis - 1)] = out;
  bases_.push_back(Base{layer, out_dims});
  View view = x->view;
  view.resize_base_axis(axis, out);
  return tensor_value(TensorRef{static_cast<int>(bases_.size()) - 1, view});
}

void Translator::translate_matmul(const Node& node) {
  const Value& a = value(node.inputs.at(0));
  const Value& b = value(node.inputs.at(1));
  const std::string& out = node.outputs.at(0);
  if (b.kind == Value::Kind::param) {
    if (auto y = linear(node, node.inputs[0], b, nullptr)) define(out, *y);
    return;
  }
  if (a.kind == Value::Kind::pending && a.pending.kind == Pending::Kind::probs) return attention(node, a, node.inputs[1]);
  if ((a.kind == Value::Kind::tensor || a.kind == Value::Kind::pending) && b.kind == Value::Kind::tensor) {
    // q @ k^T: attention if a softmax and a product with v follow, a matmul otherwise.
    Value v;
    v.kind = Value::Kind::pending;
    v.pending.kind = Pending::Kind::scores;
    v.pending.node = node.name;
    v.pending.x = node.inputs[0];
    v.pending.y = node.inputs[1];
    if (a.kind == Value::Kind::pending && a.pending.kind == Pending::Kind::scaled) {
      v.pending.x = a.pending.x;
      v.pending.factor = a.pending.factor;
    }
    return define(out, v);
  }
  refuse(node, "a matrix product of other operands than a tensor and a parameter, or two tensors");
}

void Translator::translate_gemm(const Node& node) {
  if (attribute_int(node, "transA", 0) != 0 || !near(attribute_real(node, "alpha", 1.0), 1.0) ||
      !near(attribute_real(node, "beta", 1.0), 1.0))
    return refuse(node, "a Gemm other than x @ W (+ b) (transA, alpha or beta)");
  Value w = value(node.inputs.at(1));
  if (w.kind != Value::Kind::param || w.dims.size() != 2) return refuse(node, "a Gemm whose B is not a parameter");
  if (attribute_int(node, "transB", 0) != 0) {
    w.transposed = !w.transposed;
    std::swap(w.dims[0], w.dims[1]);
  }
  const Value* bias = node.inputs.size() > 2 && !node.inputs[2].empty() ? &value(node.inputs[2]) : nullptr;
  if (auto y = linear(node, node.inputs[0], w, bias)) define(node.outputs.at(0), *y);
}

// ---- additions and products --------------------------------------------------------------------

void Translator::translate_add(const Node& node) {
  const std::string& out = node.outputs.at(0);
  for (int k = 0; k < 2; ++k) {
    const std::string& x_name = node.inputs.at(static_cast<size_t>(k));
    const std::string& other_name = node.inputs.at(static_cast<size_t>(1 - k));
    const Value& x = value(x_name);
    const Value& other = value(other_name);
    // GELU's 1 + erf(x / sqrt 2).
    if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::erf_half) {
      auto one = scalar_of(other_name);
      if (!one || *one != 1.0) return refuse(node, "an addition to GELU's erf other than of 1");
      Value v = x;
      v.pending.kind = Pending::Kind::one_plus_erf;
      v.pending.node = node.name;
      return define(out, v);
    }
    if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::tanh_of) {
      auto one = scalar_of(other_name);
      if (!one || *one != 1.0) return refuse(node, "an addition to GELU's tanh other than of 1");
      Value v = x;
      v.pending.kind = Pending::Kind::one_plus_tanh;
      v.pending.node = node.name;
      return define(out, v);
    }
    // x + 0.044715 x^3 (GELU's tanh form).
    if (other.kind == Value::Kind::pending && other.pending.kind == Pending::Kind::scaled) {
      const Value& cube = value(other.pending.x);
      if (cube.kind == Value::Kind::pending && cube.pending.kind == Pending::Kind::cube && cube.pending.x == x_name) {
        Value v;
        v.kind = Value::Kind::pending;
        v.pending.kind = Pending::Kind::cubic;
        v.pending.x = x_name;
        v.pending.factor = other.pending.factor;
        v.pending.node = node.name;
        return define(out, v);
      }
    }
    if (x.kind != Value::Kind::tensor || other.kind != Value::Kind::param) continue;
    // A linear layer's bias: Add(MatMul(x, W), b).
    const int layer = base_layer(x.tensor.base);
    const int64_t last = static_cast<int64_t>(x.tensor.view.rank()) - 1;
    if (layer >= 0 && layers_[static_cast<size_t>(layer)].bias_foldable && consumers(x_name) == 1 &&
        other.elements() == layers_[static_cast<size_t>(layer)].out_features &&
        x.tensor.view.whole_base_axis(last) == layers_[static_cast<size_t>(layer)].feature_axis) {
      OutLayer& l = layers_[static_cast<size_t>(layer)];
      l.fields.erase(std::remove_if(l.fields.begin(), l.fields.end(), [](const auto& f) { return f.first == "bias"; }),
                     l.fields.end());
      l.params.push_back(other.param);
      l.bias_foldable = false;
      return define(out, x);
    }
    // A position embedding: a parameter (1, *sample) added to each sample.
    auto t = plain(x_name, node);
    if (!t) return;
    std::vector<int64_t> expected{1};
    for (int64_t d : base_dims(t->base)) expected.push_back(d);
    if (other.dims != expected)
      return refuse(node, fmt::format("an addition of a parameter of shape [{}] to {}: mplan adds learned tensors of "
                                      "one sample's shape (a position embedding)",
                                      fmt::join(other.dims, ", "), t->view.to_string()));
    const int added = emit(node.name, "pos_embed", {t->base}, {}, "a parameter added to every sample");
    layers_[static_cast<size_t>(added)].params.push_back(other.param);
    return define(out, tensor_like(added, *t));
  }
  auto a = tensor(node.inputs.at(0), node);
  if (!a) return;
  auto b = tensor(node.inputs.at(1), node);
  if (!b) return;
  if (!(a->view.same_arrangement(b->view) && base_dims(a->base) == base_dims(b->base))) {
    a = plain(node.inputs.at(0), node);
    b = a ? plain(node.inputs.at(1), node) : std::nullopt;
    if (!a || !b) return;
    if (base_dims(a->base) != base_dims(b->base))
      return refuse(node, "an addition of tensors of different shapes (mplan's add does not broadcast)");
  }
  define(out, tensor_like(emit(node.name, "add", {a->base, b->base}), *a));
}

void Translator::translate_mul(const Node& node) {
  const std::string& out = node.outputs.at(0);
  auto pending_of = [&](const std::string& name, Pending::Kind kind) -> const Pending* {
    const Value& v = value(name);
    return v.kind == Value::Kind::pending && v.pending.kind == kind ? &v.pending : nullptr;
  };
  for (int k = 0; k < 2; ++k) {
    const std::string& x_name = node.inputs.at(static_cast<size_t>(k));
    const std::string& y_name = node.inputs.at(static_cast<size_t>(1 - k));
    // x * sigmoid(x): SiLU; x * hardsigmoid(x): hardswish (older opsets).
    for (auto [kind, op] : {std::pair{Pending::Kind::sigmoid_of, "silu"}, {Pending::Kind::hardsigmoid_of, "hardswish"}})
      if (const Pending* p = pending_of(y_name, kind); p != nullptr && p->x == x_name) {
        auto x = tensor(x_name, node);
        if (!x) return;
        return define(out, tensor_like(emit(node.name, op, {x->base}, {}, fmt::format("x * {}(x)", op == std::string("silu") ? "sigmoid" : "hardsigmoid")), *x));
      }
    // GELU's tanh form: x * x, x * x^2; x * (1 + tanh(...)), then * 0.5 (or 0.5 * x first).
    if (x_name == y_name && value(x_name).kind == Value::Kind::tensor) {
      Value v;
      v.kind = Value::Kind::pending;
      v.pending = Pending{Pending::Kind::square, x_name, "", 1.0, 0, 0, node.name};
      return define(out, v);
    }
    if (const Pending* p = pending_of(y_name, Pending::Kind::square); p != nullptr && p->x == x_name) {
      Value v;
      v.kind = Value::Kind::pending;
      v.pending = Pending{Pending::Kind::cube, x_name, "", 1.0, 0, 0, node.name};
      return define(out, v);
    }
    if (const Pending* p = pending_of(y_name, Pending::Kind::one_plus_tanh); p != nullptr) {
      if (p->x == x_name) {
        Value v = value(y_name);
        v.pending.kind = Pending::Kind::gelu_tanh_twice;
        v.pending.node = node.name;
        return define(out, v);
      }
      if (const Pending* half = pending_of(x_name, Pending::Kind::scaled);
          half != nullptr && half->x == p->x && near(half->factor, 0.5)) {
        auto x = tensor(p->x, node);
        if (!x) return;
        return define(out, tensor_like(emit(node.name, "gelu", {x->base}, {{"approximate", "tanh"}},
                                            "GELU's tanh form, from Mul, Add, Tanh, ..."),
                                       *x));
      }
    }
    if (const Pending* p = pending_of(x_name, Pending::Kind::gelu_tanh_twice); p != nullptr) {
      auto half = scalar_of(y_name);
      if (!half || !near(*half, 0.5)) return refuse(node, "GELU's product scaled by other than 0.5");
      auto x = tensor(p->x, node);
      if (!x) return;
      return define(out, tensor_like(emit(node.name, "gelu", {x->base}, {{"approximate", "tanh"}},
                                          "GELU's tanh form, from Mul, Add, Tanh, ..."),
                                     *x));
    }
    // GELU: x * (1 + erf(x / sqrt 2)), then * 0.5 (or 0.5 * x first).
    if (const Pending* p = pending_of(y_name, Pending::Kind::one_plus_erf); p != nullptr) {
      if (p->x == x_name) {
        Value v = value(y_name);
        v.pending.kind = Pending::Kind::gelu_twice;
        v.pending.node = node.name;
        return define(out, v);
      }
      if (const Pending* half = pending_of(x_name, Pending::Kind::scaled);
          half != nullptr && half->x == p->x && near(half->factor, 0.5)) {
        auto x = tensor(p->x, node);
        if (!x) return;
        return define(out, tensor_like(emit(node.name, "gelu", {x->base}, {}, "x * 0.5 * (1 + erf(x / sqrt(2)))"), *x));
      }
    }
    if (const Pending* p = pending_of(x_name, Pending::Kind::gelu_twice); p != nullptr) {
      auto half = scalar_of(y_name);
      if (!half || !near(*half, 0.5)) return refuse(node, "GELU's product scaled by other than 0.5");
      auto x = tensor(p->x, node);
      if (!x) return;
      return define(out, tensor_like(emit(node.name, "gelu", {x->base}, {}, "x * 0.5 * (1 + erf(x / sqrt(2)))"), *x));
    }
  }
  for (int k = 0; k < 2; ++k) {
    const std::string& x_name = node.inputs.at(static_cast<size_t>(k));
    const std::string& y_name = node.inputs.at(static_cast<size_t>(1 - k));
    const Value& x = value(x_name);
    const Value& y = value(y_name);
    if (x.kind != Value::Kind::tensor && x.kind != Value::Kind::pending) continue;
    // x * a number: a scale that a pattern (GELU, attention) takes in.
    if (auto factor = scalar_of(y_name); factor && y.kind == Value::Kind::constant) {
      Value v;
      v.kind = Value::Kind::pending;
      v.pending.kind = Pending::Kind::scaled;
      v.pending.x = x_name;
      v.pending.factor = *factor;
      if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::scaled) {
        v.pending.x = x.pending.x;
        v.pending.factor *= x.pending.factor;
      }
      v.pending.node = node.name;
      return define(out, v);
    }
    // x * a learned factor per channel (ConvNeXt's layer scale).
    if (y.kind == Value::Kind::param) {
      auto t = plain(x_name, node, 4);
      if (!t) return;
      const int64_t channels = base_dims(t->base).at(0);
      const std::vector<int64_t> dims = y.dims;
      if (!(dims == std::vector<int64_t>{channels, 1, 1} || dims == std::vector<int64_t>{1, channels, 1, 1} ||
            dims == std::vector<int64_t>{channels}))
        return refuse(node, "a product with a parameter other than one factor per channel");
      const int layer = emit(node.name, "channel_scale", {t->base}, {}, "a learned factor per channel");
      layers_[static_cast<size_t>(layer)].params.push_back(y.param);
      return define(out, tensor_like(layer, *t));
    }
  }
  auto a = tensor(node.inputs.at(0), node);
  if (!a) return;
  auto b = tensor(node.inputs.at(1), node);
  if (!b) return;
  if (a->view.same_arrangement(b->view) && base_dims(a->base) == base_dims(b->base))
    return define(out, tensor_like(emit(node.name, "mul", {a->base, b->base}), *a));
  // A factor per channel (squeeze-and-excitation): [N, C, H, W] * [N, C, 1, 1], either order.
  a = plain(node.inputs.at(0), node);
  b = a ? plain(node.inputs.at(1), node) : std::nullopt;
  if (!a || !b) return;
  const auto& da = base_dims(a->base);
  const auto& db = base_dims(b->base);
  const bool b_factor = db.size() == da.size() && db[0] == da[0] && elements(db) == db[0];
  const bool a_factor = db.size() == da.size() && db[0] == da[0] && elements(da) == da[0];
  if (da == db || b_factor || a_factor)
    return define(out, tensor_like(emit(node.name, "mul", {a->base, b->base}), b_factor || da == db ? *a : *b));
  refuse(node, "a product of tensors of shapes mplan's mul does not take (the same shape, or a factor per channel)");
}

void Translator::translate_div(const Node& node) {
  const Value& x = value(node.inputs.at(0));
  auto divisor = scalar_of(node.inputs.at(1));
  if ((x.kind == Value::Kind::tensor || x.kind == Value::Kind::pending) && divisor && *divisor != 0.0 &&
      value(node.inputs.at(1)).kind == Value::Kind::constant) {
    Value v;
    v.kind = Value::Kind::pending;
    v.pending.kind = Pending::Kind::scaled;
    v.pending.x = node.inputs[0];
    v.pending.factor = 1.0 / *divisor;
    if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::scaled) {
      v.pending.x = x.pending.x;
      v.pending.factor *= x.pending.factor;
    }
    v.pending.node = node.name;
    return define(node.outputs.at(0), v);
  }
  refuse(node, "a division other than by a constant number (inside GELU or attention)");
}

// ---- softmax and attention ---------------------------------------------------------------------

void Translator::translate_softmax(const Node& node) {
  const Value& x = value(node.inputs.at(0));
  const int64_t axis = attribute_int(node, "axis", -1);
  if (x.kind == Value::Kind::pending && x.pending.kind == Pending::Kind::scores) {
    if (axis != -1 && axis != 2 && axis != 3) return refuse(node, "a softmax of attention scores over another axis");
    Value v;
    v.kind = Value::Kind::pending;
    v.pending.kind = Pending::Kind::probs;
    v.pending.x = node.inputs[0];
    v.pending.node = node.name;
    return define(node.outputs.at(0), v);
  }
  auto t = tensor(node.inputs.at(0), node);
  if (!t) return;
  const int64_t rank = static_cast<int64_t>(t->view.rank());
  if ((axis < 0 ? axis + rank : axis) != rank - 1 ||
      t->view.whole_base_axis(rank - 1) != static_cast<int>(base_dims(t->base).size()))
    return refuse(node, "a softmax over another axis than the last");
  define(node.outputs.at(0), tensor_like(emit(node.name, "softmax", {t->base}), *t));
}

void Translator::attention(const Node& node, const Value& probs, const std::string& v_name) {
  const Value& scores = value(probs.pending.x);
  const Pending s = scores.pending;
  auto q = tensor(s.x, node);
  if (!q) return;
  auto kt = tensor(s.y, node);
  if (!kt) return;
  auto v = tensor(v_name, node);
  if (!v) return;
  // Each operand: (leading axes of batch and heads, rows, columns) over a base [T, D],
  // D cut into (heads, head size) where heads > 1.
  struct Operand {
    bool ok = false;
    int64_t heads = 1, head_dim = 0, tokens = 0;
    std::vector<int> leading;  // 0 for the batch, 1 for the heads, in order
  };
  auto read = [&](const TensorRef& t, bool transposed) {
    Operand o;
    const View& view = t.view;
    const auto& dims = base_dims(t.base);
    const int64_t r = static_cast<int64_t>(view.rank());
    if (dims.size() != 2 || r < 3) return o;
    const int64_t token_axis = transposed ? r - 1 : r - 2, column_axis = transposed ? r - 2 : r - 1;
    if (view.whole_base_axis(token_axis) != 1) return o;
    const std::vector<int>& d = view.base_axis_atoms(2);
    const std::vector<int>& column = view.group(column_axis);
    if (d.empty() || column.size() != 1 || column[0] != d.back() || d.size() > 2) return o;
    o.head_dim = view.atom(d.back()).size;
    const int head_atom = d.size() == 2 ? d[0] : -1;
    o.heads = head_atom >= 0 ? view.atom(head_atom).size : 1;
    o.tokens = dims[0];
    for (int64_t k = 0; k < r - 2; ++k)
      for (int id : view.group(k)) {
        if (id == 0)
          o.leading.push_back(0);
        else if (id == head_atom)
          o.leading.push_back(1);
        else
          return o;
      }
    const size_t expected = head_atom >= 0 ? 2 : 1;
    o.ok = o.leading.size() == expected;
    return o;
  };
  const Operand oq = read(*q, false), ok = read(*kt, true), ov = read(*v, false);
  if (!oq.ok || !ok.ok || !ov.ok || oq.heads != ok.heads || ok.heads != ov.heads || oq.head_dim != ok.head_dim ||
      ok.head_dim != ov.head_dim || ok.tokens != ov.tokens || oq.leading != ok.leading || ok.leading != ov.leading)
    return refuse(node, fmt::format("softmax(q @ k^T) @ v whose operands are not multi-head slices of sequences "
                                    "[T, D] alike (q {}, k^T {}, v {})",
                                    q->view.to_string(), kt->view.to_string(), v->view.to_string()));
  std::vector<std::pair<std::string, std::string>> fields{{"heads", std::to_string(oq.heads)}};
  if (!near(s.factor, 1.0 / std::sqrt(static_cast<double>(oq.head_dim)))) fields.emplace_back("scale", real_text(s.factor));
  const int layer = emit(node.name, "attention", {q->base, kt->base, v->base}, fields,
                         "softmax(q @ k^T * scale) @ v per head, from MatMul, Softmax and MatMul");
  define(node.outputs.at(0), tensor_like(layer, *q));
}

}  // namespace mplan::onnx_import
