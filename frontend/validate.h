#pragma once
// Whole-model validation (docs/model-format.md, "Validation"), shared by
// parse_model and validate_model. The parser passes a label per layer so that
// messages about layers made from blocks name the block instance.

#include <string>
#include <vector>

#include "frontend/error.h"
#include "frontend/model.h"

namespace mplan {

// "layer 'conv3'": how messages name a layer that has no better label.
std::string default_layer_label(const Layer& layer);

// Recomputes every output shape and checks every rule of the format.
// `layer_labels` is empty (default labels) or has one label per layer, e.g.
// "layer 'layer1.0.conv2' (block 'bottleneck' used at line 40)".
Status validate_model_labelled(Model& model, const std::vector<std::string>& layer_labels);

}  // namespace mplan
