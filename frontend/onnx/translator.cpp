// The importer's core (translator.h): values, layers, problems, and the walk
// over the graph; the nodes' own rules are in translate_*.cpp.

#include "frontend/onnx/translator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace mplan::onnx_import {
namespace {

const Value kUnknown{};

// A layer name from an ONNX name: letters, digits, '_', '-' and '/' kept,
// anything else (PyTorch's '.' in "layer1.0") an '_'; no leading '/'.
std::string layer_name_of(const std::string& onnx_name) {
  std::string out;
  for (unsigned char c : onnx_name) {
    const bool keep = std::isalnum(c) || c == '_' || c == '-' || c == '/';
    out += keep ? static_cast<char>(c) : '_';
  }
  while (!out.empty() && out.front() == '/') out.erase(out.begin());
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out.front()))) out = "n" + out;
  return out;
}

}  // namespace

void OutLayer::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : fields)
    if (k == key) {
      v = value;
      return;
    }
  fields.emplace_back(key, value);
}

int64_t Value::elements() const {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  return count;
}

Translator::Translator(const Graph& graph, const ImportOptions& options, std::string file)
    : graph_(graph), options_(options), file_(std::move(file)) {
  used_names_["input"] = 1;
  for (const Node& node : graph_.nodes)
    for (const std::string& in : node.inputs)
      if (!in.empty()) ++consumers_[in];
  for (const ValueInfo& out : graph_.outputs) ++consumers_[out.name];
}

// ---- values ---------------------------------------------------------------------------------------

const Value& Translator::value(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? kUnknown : it->second;
}

void Translator::define(const std::string& name, Value v) {
  if (!name.empty()) values_[name] = std::move(v);
}

Value Translator::constant_ints(std::vector<Dim> ints, std::vector<int64_t> dims) const {
  Value v;
  v.kind = Value::Kind::constant;
  v.ints = std::move(ints);
  v.dims = std::move(dims);
  return v;
}

Value Translator::constant_reals(std::vector<double> reals, std::vector<int64_t> dims) const {
  Value v;
  v.kind = Value::Kind::constant;
  v.real = true;
  v.reals = std::move(reals);
  v.dims = std::move(dims);
  return v;
}

Value Translator::new_tensor(int layer, std::vector<int64_t> dims) {
  bases_.push_back(Base{layer, dims});
  Value v;
  v.kind = Value::Kind::tensor;
  v.tensor.base = static_cast<int>(bases_.size()) - 1;
  v.tensor.view = View::plain(dims);
  return v;
}

Value Translator::tensor_like(int layer, const TensorRef& like) {
  bases_.push_back(Base{layer, base_dims(like.base)});
  return tensor_value(TensorRef{static_cast<int>(bases_.size()) - 1, like.view});
}

int64_t Translator::consumers(const std::string& name) const {
  auto it = consumers_.find(name);
  return it == consumers_.end() ? 0 : it->second;
}

std::optional<std::vector<Dim>> Translator::ints_of(const std::string& name) const {
  const Value& v = value(name);
  if (v.kind != Value::Kind::constant) return std::nullopt;
  if (!v.real) return v.ints;
  std::vector<Dim> out;
  for (double r : v.reals) {
    if (r != static_cast<double>(static_cast<int64_t>(r))) return std::nullopt;
    out.push_back(Dim{static_cast<int64_t>(r), false});
  }
  return out;
}

std::optional<std::vector<int64_t>> Translator::numbers_of(const std::string& name) const {
  auto ints = ints_of(name);
  if (!ints) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *ints) {
    if (d.batch) return std::nullopt;
    out.push_back(d.coef);
  }
  return out;
}

std::optional<double> Translator::scalar_of(const std::string& name) const {
  const Value& v = value(name);
  if (v.kind == Value::Kind::param) {
    // A one-element initializer with its value (exported constants).
    auto it = graph_.initializers.find(v.param);
    if (it != graph_.initializers.end() && it->second.has_values && it->second.values.size() == 1)
      return it->second.values[0];
    return std::nullopt;
  }
  if (v.kind != Value::Kind::constant) return std::nullopt;
  if (v.real) return v.reals.size() == 1 ? std::optional<double>(v.reals[0]) : std::nullopt;
  if (v.ints.size() != 1 || v.ints[0].batch) return std::nullopt;
  return static_cast<double>(v.ints[0].coef);
}

// ---- layers ---------------------------------------------------------------------------------------

std::string Translator::unique_name(const std::string& onnx_name) {
  const std::string base = layer_name_of(onnx_name);
  std::string name = base;
  for (int k = 2; used_names_.count(name) > 0; ++k) name = fmt::format("{}_{}", base, k);
  used_names_[name] = 1;
  return name;
}

int Translator::emit(const std::string& name, const std::string& op, const std::vector<int>& input_bases,
                     std::vector<std::pair<std::string, std::string>> fields, std::string note) {
  OutLayer layer;
  layer.name = unique_name(name);
  layer.op = op;
  for (int b : input_bases) layer.inputs.push_back(base_layer(b) < 0 ? "input" : layers_[base_layer(b)].name);
  layer.fields = std::move(fields);
  layer.note = std::move(note);
  layers_.push_back(std::move(layer));
  return static_cast<int>(layers_.size()) - 1;
}

// ---- problems -------------------------------------------------------------------------------------

void Translator::refuse(const Node& node, std::string reason) {
  for (const Problem& p : problems_)
    if (p.node == node.name) return;  // one reason per node is enough
  problems_.push_back({node.name, node.op_type, node.attributes_text(), std::move(reason)});
  for (const std::string& out : node.outputs) define(out, kUnknown);
}

bool Translator::has_unknown_input(const Node& node) const {
  for (const std::string& in : node.inputs)
    if (!in.empty() && value(in).kind == Value::Kind::unknown) return true;
  return false;
}

// ---- the tensor a value is ------------------------------------------------------------------------

std::optional<TensorRef> Translator::tensor(const std::string& name, const Node& node) {
  const Value& v = value(name);
  if (v.kind == Value::Kind::tensor) {
    if (bases_.at(static_cast<size_t>(v.tensor.base)).retired) {
      refuse(node, fmt::format("its input '{}' is the output of a convolution that another node uses as a sequence "
                               "of patches (patch_embed); mplan cannot keep both",
                               name));
      return std::nullopt;
    }
    return v.tensor;
  }
  if (v.kind != Value::Kind::pending) {
    refuse(node, fmt::format("its input '{}' is a {}, where mplan needs a tensor computed from the image", name,
                             v.kind == Value::Kind::param ? "parameter" : "constant"));
    return std::nullopt;
  }
  // A pending pattern consumed by something else: its own layer, where it has one.
  const Pending p = v.pending;
  const Node* maker = nullptr;
  for (const Node& n : graph_.nodes)
    if (n.name == p.node) maker = &n;
  const Node& at = maker != nullptr ? *maker : node;
  auto unary = [&](const char* op) -> std::optional<TensorRef> {
    auto x = tensor(p.x, at);
    if (!x) return std::nullopt;
    const int layer = emit(p.node, op, {x->base});
    Value out = tensor_like(layer, *x);
    define(name, out);
    return out.tensor;
  };
  switch (p.kind) {
    case Pending::Kind::sigmoid_of: return unary("sigmoid");
    case Pending::Kind::square: {  // x * x that is not GELU's: a product layer
      auto x = tensor(p.x, at);
      if (!x) return std::nullopt;
      Value out = tensor_like(emit(p.node, "mul", {x->base, x->base}), *x);
      define(name, out);
      return out.tensor;
    }
    case Pending::Kind::hardsigmoid_of: return unary("hardsigmoid");
    case Pending::Kind::probs: {
      auto scores = tensor(p.x, at);
      if (!scores) return std::nullopt;
      const int last = static_cast<int>(scores->view.rank()) - 1;
      if (scores->view.whole_base_axis(last) != static_cast<int>(base_dims(scores->base).size())) {
        refuse(at, "a softmax over an axis that is not the last of its tensor");
        return std::nullopt;
      }
      return unary("softmax");
    }
    case Pending::Kind::scores: {
      // q @ k^T that is not followed by a softmax and a product with v: a matmul layer.
      auto q = plain(p.x, at), k = plain(p.y, at);
      if (!q || !k) return std::nullopt;
      if (p.factor != 1.0) {
        refuse(at, "a product scaled by a constant that is not attention (mplan has no layer to scale)");
        return std::nullopt;
      }
      const auto& qd = base_dims(q->base);
      const int layer = emit(p.node, "matmul", {q->base, k->base});
      std::vector<int64_t> dims = qd;
      dims.back() = base_dims(k->base).back();
      Value out = new_tensor(layer, dims);
      define(name, out);
      return out.tensor;
    }
    default:
      refuse(node, fmt::format("its input '{}' is part of a pattern (made by '{}') that mplan has no layer for "
                               "on its own",
                               name, p.node));
      return std::nullopt;
  }
}

std::optional<TensorRef> Translator::plain(const std::string& name, const Node& node, std::optional<size_t> rank) {
  auto t = tensor(name, node);
  if (!t) return std::nullopt;
  const View& v = t->view;
  const std::vector<Dim> dims = v.dims();
  if (rank && dims.size() != *rank) {
    std::string shape;
    for (const Dim& d : dims) shape += (shape.empty() ? "" : ", ") + d.to_string();
    refuse(node, fmt::format("its input '{}' is ({}), where mplan needs a tensor of rank {}", name, shape, *rank));
    return std::nullopt;
  }
  if (v.is_plain()) return t;
  if (dims.empty() || v.batch_axis() != 0) {
    refuse(node, fmt::format("its input '{}' has the batch elsewhere than in front: {}", name, v.to_string()));
    return std::nullopt;
  }
  std::vector<int64_t> per_sample;
  for (size_t k = 1; k < dims.size(); ++k) per_sample.push_back(dims[k].coef);
  const Value& current = value(name);
  auto moved = [&](int layer) {
    Value out = new_tensor(layer, per_sample);
    if (current.kind == Value::Kind::tensor) define(name, out);
    return out.tensor;
  };
  // The base in its own order, grouped otherwise: a per-sample reshape.
  if (v.is_reshaped_plain()) {
    std::string shape;
    for (int64_t d : per_sample) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return moved(emit(node.name + "/reshape", "reshape", {t->base}, {{"shape", "[" + shape + "]"}},
                      "the view of the next node's input"));
  }
  const auto& base = base_dims(t->base);
  // ShuffleNet's channel shuffle: the channels cut in (g, C/g), seen as (C/g, g).
  if (base.size() >= 1 && v.rank() == base.size() + 1) {
    const auto& channel = v.base_axis_atoms(1);
    bool rest_plain = true;
    for (size_t k = 2; k < v.rank(); ++k) rest_plain = rest_plain && v.group(static_cast<int64_t>(k)) == v.base_axis_atoms(static_cast<int>(k));
    if (rest_plain && channel.size() == 2 && v.group(1) == std::vector<int>{channel[1], channel[0]})
      return moved(emit(node.name + "/channel_shuffle", "channel_shuffle", {t->base},
                        {{"groups", std::to_string(v.atom(channel[0]).size)}},
                        "ShuffleNet's reshape, transpose, reshape"));
  }
  // ViT's patch embedding: a conv with kernel = stride over feature maps
  // [D, h, w], seen as the sequence (N, h*w, D): the conv becomes patch_embed.
  if (base.size() == 3 && v.rank() == 3) {
    const auto& d = v.base_axis_atoms(1);
    std::vector<int> hw = v.base_axis_atoms(2);
    hw.insert(hw.end(), v.base_axis_atoms(3).begin(), v.base_axis_atoms(3).end());
    const int layer = base_layer(t->base);
    if (layer >= 0 && v.group(1) == hw && v.group(2) == d && layers_[layer].op == "conv") {
      OutLayer& conv = layers_[layer];
      bool used = false;
      for (const OutLayer& other : layers_)
        for (const std::string& in : other.inputs) used = used || in == conv.name;
      std::string kernel, stride, pad = "0", dilation = "1", groups = "1";
      for (const auto& [key, value] : conv.fields) {
        if (key == "kernel") kernel = value;
        if (key == "stride") stride = value;
        if (key == "pad") pad = value;
        if (key == "dilation") dilation = value;
        if (key == "groups") groups = value;
      }
      if (!used && kernel == stride && pad == "0" && dilation == "1" && groups == "1" &&
          kernel.find('[') == std::string::npos) {
        std::vector<std::pair<std::string, std::string>> fields;
        for (const auto& [key, value] : conv.fields)
          if (key == "out" || key == "bias") fields.emplace_back(key, value);
        fields.insert(fields.begin() + 1, {"patch", kernel});
        conv.op = "patch_embed";
        conv.fields = fields;
        conv.note = "a conv with kernel = stride, its output seen as a sequence of patches";
        bases_[static_cast<size_t>(t->base)].retired = true;
        bases_.push_back(Base{layer, {base[1] * base[2], base[0]}});
        Value replaced = tensor_value(TensorRef{static_cast<int>(bases_.size()) - 1,
                                                View::plain({base[1] * base[2], base[0]})});
        if (current.kind == Value::Kind::tensor) define(name, replaced);
        return replaced.tensor;
      }
    }
  }
  refuse(node, fmt::format("its input '{}' is {}, a rearrangement of another layer's output that mplan has no "
                           "layer for",
                           name, v.to_string()));
  return std::nullopt;
}

// ---- the walk --------------------------------------------------------------------------------------

Result<ImportResult> Translator::run() {
  // Parameters: initializers and graph inputs other than the image. The
  // image is a float [N, C, H, W] input that some node takes as its first
  // input (a conv's weight, also 4-D, comes second).
  std::set<std::string> first_inputs;
  for (const Node& node : graph_.nodes)
    if (!node.inputs.empty()) first_inputs.insert(node.inputs[0]);
  std::vector<const ValueInfo*> data_inputs;
  for (const ValueInfo& in : graph_.inputs) {
    if (graph_.initializers.count(in.name) > 0) continue;
    if (!options_.input.empty() ? in.name == options_.input
                                : ((in.type == ElementType::float32 || in.type == ElementType::float16 ||
                                    in.type == ElementType::bfloat16) &&
                                   in.dims.size() == 4 &&
                                   first_inputs.count(in.name) > 0))
      data_inputs.push_back(&in);
  }
  if (!options_.input.empty() && data_inputs.empty())
    return Error{{file_, 0, 0}, fmt::format("the graph has no input '{}' (--input)", options_.input)};
  if (data_inputs.size() != 1) {
    std::string names;
    for (const ValueInfo* in : data_inputs) names += (names.empty() ? "" : ", ") + in->name;
    return Error{{file_, 0, 0},
                 data_inputs.empty()
                     ? std::string("the graph has no image input (a float tensor [N, C, H, W]); name it with --input")
                     : fmt::format("the graph has several image inputs ({}); pick one with --input", names)};
  }
  const ValueInfo& image = *data_inputs[0];
  // A graph exported in 16 bits (model.half(), or bfloat16) trains as autocast would run it.
  precision_ = options_.precision;
  if (!precision_ && (image.type == ElementType::float16 || image.type == ElementType::bfloat16)) {
    precision_ = image.type == ElementType::float16 ? Precision::fp16 : Precision::bf16;
    notes_.push_back(fmt::format("the input '{}' is {}: imported as precision {} (docs/model-format.md, \"Precision\")",
                     image.name, image.type == ElementType::float16 ? "float16" : "bfloat16",
                     precision_name(*precision_)));
  }
  if (!image.has_shape || image.dims.size() != 4 || image.dims[1] < 1 || image.dims[2] < 1 || image.dims[3] < 1)
    return Error{{file_, 0, 0}, fmt::format("the input '{}' must be images [N, C, H, W] with fixed C, H and W",
                                            image.name)};
  graph_batch_ = image.dims[0];
  const int64_t batch = options_.batch > 0 ? options_.batch : graph_batch_;
  if (batch < 1)
    return Error{{file_, 0, 0}, fmt::format("the input '{}' has no fixed batch size: give one with --batch",
                                            image.name)};
  const std::vector<int64_t> input_dims{image.dims[1], image.dims[2], image.dims[3]};
  define(image.name, new_tensor(-1, input_dims));
  // Parameters with a negative or absurd size are left undefined: a node
  // using one is refused as using what the graph does not define.
  auto sane = [](const std::vector<int64_t>& dims) {
    for (int64_t d : dims)
      if (d < 1 || d > (int64_t{1} << 40)) return false;
    return true;
  };
  for (const auto& [name, t] : graph_.initializers) {
    if (!sane(t.dims) && !t.has_values) continue;
    Value v;
    v.kind = Value::Kind::param;
    v.param = name;
    v.dims = t.dims;
    define(name, v);
    parameter_elements_[name] = t.elements();
  }
  for (const ValueInfo& in : graph_.inputs) {
    if (&in == &image || graph_.initializers.count(in.name) > 0) continue;
    if (!in.has_shape || !sane(in.dims)) continue;  // unknown: any node using it is refused
    Value v;
    v.kind = Value::Kind::param;
    v.param = in.name;
    v.dims = in.dims;
    define(in.name, v);
    int64_t count = 1;
    for (int64_t d : in.dims) count *= std::max<int64_t>(d, 0);
    parameter_elements_[in.name] = count;
  }

  for (const Node& node : graph_.nodes) translate(node);

  // The logits.
  std::string output = options_.output;
  if (output.empty() && !graph_.outputs.empty()) output = graph_.outputs[0].name;
  bool listed = false;
  for (const ValueInfo& out : graph_.outputs) listed = listed || out.name == output;
  if (!listed && values_.count(output) == 0)
    return Error{{file_, 0, 0}, fmt::format("the graph has no output '{}' (--output)", output)};
  if (graph_.outputs.size() > 1 && options_.output.empty())
    notes_.push_back(fmt::format("the graph has {} outputs; the first, '{}', is taken as the logits (--output "
                                 "picks another); layers that feed only the others are dropped",
                                 graph_.outputs.size(), output));
  int output_layer = -1;
  int64_t classes = 0;
  if (problems_.empty()) {
    Node end;
    end.name = "(graph output)";
    end.op_type = "output";
    auto logits = plain(output, end, 2);
    if (logits) {
      output_layer = base_layer(logits->base);
      classes = base_dims(logits->base).at(0);
      if (output_layer < 0) problems_.push_back({output, "output", "", "the logits are the image itself"});
    }
  }
  if (!problems_.empty()) {
    std::string text = fmt::format("{} node{} cannot be imported, so nothing was written:", problems_.size(),
                                   problems_.size() == 1 ? "" : "s");
    for (const Problem& p : problems_)
      text += fmt::format("\n  node '{}' ({}, {}): {}", p.node, p.op_type, p.attributes, p.reason);
    return Error{{file_, 0, 0}, text};
  }
  if (options_.classes > 0 && options_.classes != classes)
    return Error{{file_, 0, 0}, fmt::format("--classes {} does not match the logits' {} values ('{}')",
                                            options_.classes, classes, output)};

  const std::string output_name = layers_[static_cast<size_t>(output_layer)].name;
  pack_attention_inputs();  // removes layers: find the logits' again
  for (size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].name == output_name) output_layer = static_cast<int>(l);

  // Keep what the logits depend on.
  std::set<std::string> needed{output_name};
  for (int l = output_layer; l >= 0; --l)
    if (needed.count(layers_[l].name) > 0)
      for (const std::string& in : layers_[l].inputs) needed.insert(in);
  std::vector<OutLayer> kept;
  for (int l = 0; l <= output_layer; ++l)
    if (needed.count(layers_[l].name) > 0) kept.push_back(layers_[l]);
  const size_t dropped = layers_.size() - kept.size();
  if (dropped > 0)
    notes_.push_back(fmt::format("{} layer{} that the logits do not depend on {} dropped (auxiliary heads, unused "
                                 "outputs)",
                                 dropped, dropped == 1 ? "" : "s", dropped == 1 ? "was" : "were"));
  layers_ = std::move(kept);
  std::set<std::string> params;
  for (const OutLayer& l : layers_) params.insert(l.params.begin(), l.params.end());
  int64_t onnx_parameters = 0;
  for (const std::string& p : params) onnx_parameters += parameter_elements_[p];

  ImportResult result;
  result.yaml = yaml(layers_.back().name, classes, batch, input_dims, onnx_parameters);
  result.notes = notes_;
  result.onnx_parameters = onnx_parameters;
  result.layers = static_cast<int64_t>(layers_.size()) + 1;
  return result;
}

}  // namespace mplan::onnx_import
