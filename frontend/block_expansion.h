#pragma once
// Blocks and repeats (docs/model-format.md, "Blocks"): expands the model's
// layer list, with every block instance and repetition, into the flat,
// topologically ordered layer list of a Model (frontend-internal).

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "ops/model.h"

namespace mplan {

// The most layers a model may expand to; a guard against "repeat: 1000000000".
inline constexpr size_t kMaxLayers = 200000;
// The deepest nesting of block instances (a block using a block using ...).
// Real networks nest two or three deep; the limit keeps the expansion's
// recursion (and its per-level bookkeeping) far from the stack's end.
inline constexpr size_t kMaxBlockNesting = 64;

struct ExpandedLayers {
  std::vector<Layer> layers;        // fields read, inputs resolved; shapes not yet inferred
  std::vector<std::string> labels;  // per layer, for messages: "layer 'layer1.0.conv2' (block
                                    // 'bottleneck' used at line 40)"
};

// `blocks` is the model's `blocks:` node (undefined when absent), `layers` its
// `layers:` node. Throws InputError (yaml_reader.h) at the offending node.
ExpandedLayers expand_layers(const YAML::Node& blocks, const YAML::Node& layers,
                             const std::string& file);

}  // namespace mplan
