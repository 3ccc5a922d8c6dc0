#pragma once
// Whole-model validation (docs/model-format.md, "Validation"), shared by
// parse_model and validate_model. The parser passes a label per layer so that
// messages about layers made from blocks name the block instance.

#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"

namespace mplan {

// "layer 'conv3'": how messages name a layer that has no better label.
std::string default_layer_label(const Layer& layer);

// Recomputes every output shape and checks every rule of the format.
// `layer_labels` is empty (default labels) or has one label per layer, e.g.
// "layer 'layer1.0.conv2' (block 'bottleneck' used at line 40)".
Status validate_model_labelled(Model& model, const std::vector<std::string>& layer_labels);

// The most elements all of a model's layer outputs (and its input) may have
// together at one batch: 2^58, so that every byte count of the model's
// tensors (x4 bytes, times the few blocks per layer, summed over the model)
// fits int64 with room to spare (1 EiB of activations).
inline constexpr int64_t kMaxBatchElements = int64_t{1} << 58;

// Whether `batch` samples (a mini-batch or a sub-batch) are a size mplan
// computes with: 1..kMaxSizeField, and the model's input and layer outputs at
// that batch within kMaxBatchElements in total. `what` names the value in the
// message ("--batch", "batch", "--sub-batches"). The model's shapes must be
// inferred (a validated model).
Status check_batch(const Model& model, int64_t batch, const std::string& what);

}  // namespace mplan
