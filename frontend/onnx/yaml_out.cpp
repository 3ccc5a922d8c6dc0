// The model file the importer writes: a header saying where it came from,
// the model's fields, and one flow-style line per layer (docs/model-format.md).

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "frontend/onnx/translator.h"

namespace mplan::onnx_import {

void Translator::pack_attention_inputs() {
  // q, k and v taken as three slices [0, D), [D, 2D), [2D, 3D) of one [T, 3D]
  // projection, used by nothing else: the attention reads the projection
  // itself (the packed form, no copies).
  auto find = [&](const std::string& name) -> int {
    for (size_t l = 0; l < layers_.size(); ++l)
      if (layers_[l].name == name) return static_cast<int>(l);
    return -1;
  };
  auto field = [](const OutLayer& l, const std::string& key) {
    for (const auto& [k, v] : l.fields)
      if (k == key) return v;
    return std::string(key == "begin" || key == "axis" ? "0" : "");
  };
  auto uses = [&](const std::string& name) {
    int count = 0;
    for (const OutLayer& l : layers_)
      for (const std::string& in : l.inputs) count += in == name;
    return count;
  };
  std::vector<std::string> removed;
  for (OutLayer& a : layers_) {
    if (a.op != "attention" || a.inputs.size() != 3) continue;
    std::string source;
    bool packable = true;
    int64_t width = -1;
    for (int k = 0; k < 3 && packable; ++k) {
      const int s = find(a.inputs[static_cast<size_t>(k)]);
      if (s < 0 || layers_[static_cast<size_t>(s)].op != "slice" || uses(layers_[static_cast<size_t>(s)].name) != 1) {
        packable = false;
        break;
      }
      const OutLayer& slice = layers_[static_cast<size_t>(s)];
      const int64_t begin = std::stoll(field(slice, "begin")), end = std::stoll(field(slice, "end"));
      if (k == 0) {
        source = slice.inputs.at(0);
        width = end - begin;
      }
      const bool last_axis = field(slice, "axis") == "1";  // D of [T, 3D]
      packable = slice.inputs.at(0) == source && last_axis && end - begin == width && begin == k * width;
    }
    // The projection must be exactly [T, 3D]: its `out` is 3D.
    const int src = packable ? find(source) : -1;
    if (!packable || src < 0 || layers_[static_cast<size_t>(src)].op != "linear" ||
        field(layers_[static_cast<size_t>(src)], "out") != std::to_string(3 * width))
      continue;
    for (const std::string& in : a.inputs) removed.push_back(in);
    a.inputs = {source};
    a.note = "softmax(q @ k^T * scale) @ v per head on the packed projection [q | k | v], from Slice, MatMul, "
             "Softmax and MatMul";
  }
  std::vector<OutLayer> kept;
  for (OutLayer& l : layers_)
    if (std::find(removed.begin(), removed.end(), l.name) == removed.end()) kept.push_back(std::move(l));
  layers_ = std::move(kept);
}

std::string Translator::yaml(const std::string& output_layer, int64_t classes, int64_t batch,
                             const std::vector<int64_t>& input_dims, int64_t onnx_parameters) const {
  std::string name = options_.name;
  if (name.empty()) name = std::filesystem::path(file_).stem().string();
  if (name.empty()) name = "model";
  std::string text = fmt::format(
      "# Imported by `mplan import` from {} ({}, opset {}).\n"
      "# Layers are named after the ONNX nodes they come from; ONNX parameters used: {}.\n",
      std::filesystem::path(file_).filename().string(), graph_.producer.empty() ? "unknown producer" : graph_.producer,
      graph_.opset, onnx_parameters);
  for (const std::string& note : notes_) text += "# Note: " + note + "\n";
  const Optimizer& o = options_.optimizer;
  text += fmt::format("name: \"{}\"\ninput: [{}, {}, {}]\nbatch: {}\nclasses: {}\n", name, input_dims[0],
                      input_dims[1], input_dims[2], batch, classes);
  if (precision_) text += fmt::format("precision: {}\n", precision_name(*precision_));
  text += fmt::format("optimizer: {{kind: {}, lr: {}, momentum: {}, weight_decay: {}}}\n", o.kind, o.lr, o.momentum,
                      o.weight_decay);
  text += "layers:\n";
  std::string previous = "input";
  for (const OutLayer& l : layers_) {
    std::string line = fmt::format("  - {{name: {}, op: {}", l.name, l.op);
    const bool follows = l.inputs.size() == 1 && l.inputs[0] == previous;
    if (!follows) {
      if (l.inputs.size() == 1) {
        line += ", in: " + l.inputs[0];
      } else {
        line += ", in: [";
        for (size_t k = 0; k < l.inputs.size(); ++k) line += (k ? ", " : "") + l.inputs[k];
        line += "]";
      }
    }
    for (const auto& [key, value] : l.fields) line += ", " + key + ": " + value;
    line += "}";
    if (!l.note.empty()) line += "  # " + l.note;
    text += line + "\n";
    previous = l.name;
  }
  std::string loss = "loss";
  for (int k = 2; used_names_.count(loss) > 0; ++k) loss = fmt::format("loss_{}", k);
  text += fmt::format("  - {{name: {}, op: softmax_xent{}}}  # appended: the loss on the logits\n", loss,
                      previous == output_layer ? "" : ", in: " + output_layer);
  return text;
}

}  // namespace mplan::onnx_import
