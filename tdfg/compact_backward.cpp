// The layers that take their compact backward: a fixed point over the TDFG's
// backward readers (tdfg/compact_backward.h).

#include "tdfg/compact_backward.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/op_table.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

bool can_take(const Layer& layer) {
  const OpSpec& spec = op_spec(layer.op);
  return spec.has_compact_backward != nullptr && spec.has_compact_backward(layer);
}

// Whether a backward task other than `except` reads block b.
bool read_backward(const Tdfg& tdfg, BlockId b, TaskId except) {
  if (b == kNoBlock) return false;
  for (TaskId r : tdfg.blocks[b].readers)
    if (r != except && tdfg.tasks[r].kind != TaskKind::FP) return true;
  return false;
}

// Whether layer l's compact BP1, in this TDFG, leaves a tensor unread by the
// backward pass that its plain BP1 would read: the ReLU's output, the max
// pool's input or output.
bool frees_a_tensor(const Tdfg& tdfg, LayerId l) {
  const TaskId bp1 = tdfg.bp1_of[l];
  if (bp1 == kNoTask) return false;  // no gradient reaches its input: nothing to keep
  const Layer& layer = tdfg.model->layers[l];
  const BlockId output = tdfg.output_of[l];
  if (layer.op == Op::pool) {
    const LayerId producer = layer.inputs.at(0);
    const BlockId input = producer == kModelInput ? tdfg.input_block : tdfg.output_of[producer];
    return !read_backward(tdfg, input, bp1) || !read_backward(tdfg, output, bp1);
  }
  return !read_backward(tdfg, output, bp1);
}

}  // namespace

std::vector<LayerId> compact_backward_layers(const Model& model) {
  std::vector<LayerId> chosen;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l)
    if (can_take(model.layers[l])) chosen.push_back(l);
  while (!chosen.empty()) {
    const Model trial = with_compact_backward(model, chosen);
    const Tdfg tdfg = build_tdfg(trial);
    std::vector<LayerId> kept;
    for (LayerId l : chosen)
      if (frees_a_tensor(tdfg, l)) kept.push_back(l);
    if (kept.size() == chosen.size()) break;
    chosen = std::move(kept);
  }
  return chosen;
}

Model with_compact_backward(const Model& model, const std::vector<LayerId>& layers) {
  Model out = model;
  for (Layer& layer : out.layers) layer.compact_backward = false;
  for (LayerId l : layers) {
    MPLAN_CHECK(l >= 0 && l < static_cast<LayerId>(out.layers.size()) && can_take(out.layers[l]),
                "with_compact_backward: a layer without a compact backward");
    out.layers[l].compact_backward = true;
  }
  return out;
}

Result<Model> with_compact_backward(const Model& model, const std::vector<std::string>& layer_names) {
  std::vector<LayerId> layers;
  for (const std::string& name : layer_names) {
    const auto it = std::find_if(model.layers.begin(), model.layers.end(),
                                 [&](const Layer& layer) { return layer.name == name; });
    if (it == model.layers.end())
      return Error{{}, fmt::format("compact_backward names layer '{}', which the model does not have", name)};
    if (!can_take(*it))
      return Error{{}, fmt::format("compact_backward names layer '{}', a {} without a compact backward (only relu "
                                   "and max pools of at most 255 elements have one)",
                                   name, op_name(it->op))};
    layers.push_back(static_cast<LayerId>(it - model.layers.begin()));
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return with_compact_backward(model, layers);
}

std::vector<std::string> compact_backward_names(const Model& model) {
  std::vector<std::string> names;
  for (const Layer& layer : model.layers)
    if (layer.compact_backward) names.push_back(layer.name);
  return names;
}

}  // namespace mplan
