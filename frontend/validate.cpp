#include "frontend/validate.h"

#include <fmt/format.h>

#include <unordered_map>

#include "frontend/parse.h"
#include "frontend/shape_inference.h"

namespace mplan {
namespace {

// A whole mini-batch of any tensor stays below 2^58 elements, so that byte
// counts (x4 for float32, summed over a few tensors) fit comfortably in int64.
constexpr int64_t kMaxBatchElements = int64_t{1} << 58;

Error model_error(const Model& model, std::string message) {
  return Error{SourceLocation{model.source_file, 0, 0}, std::move(message)};
}

Status check_model_fields(const Model& model) {
  if (model.batch < 1 || model.batch > kMaxSizeField)
    return model_error(model, fmt::format("batch must be between 1 and {}, got {}", kMaxSizeField,
                                          model.batch));
  if (model.classes < 1 || model.classes > kMaxSizeField)
    return model_error(model, fmt::format("classes must be between 1 and {}, got {}",
                                          kMaxSizeField, model.classes));
  if (model.input.dims.size() != 3)
    return model_error(model, fmt::format("input must be a per-sample shape [C, H, W], got {}",
                                          model.input.to_string()));
  for (int64_t d : model.input.dims)
    if (d < 1 || d > kMaxSizeField)
      return model_error(model, fmt::format("input dimensions must be between 1 and {}, got {}",
                                            kMaxSizeField, model.input.to_string()));
  if (!is_valid_size(model.input))
    return model_error(model, fmt::format("input {} is too large (at most {} elements per sample)",
                                          model.input.to_string(), kMaxElements));
  if (model.dtype != "float32")
    return model_error(model, fmt::format("dtype '{}' is not supported (expected float32)",
                                          model.dtype));
  if (model.math != "default" && model.math != "fp32" && model.math != "tf32")
    return model_error(model, fmt::format("math '{}' is not supported (expected default, fp32 or tf32)", model.math));
  if (model.optimizer.kind != "sgd")
    return model_error(model, fmt::format("optimizer kind '{}' is not supported (expected sgd)",
                                          model.optimizer.kind));
  if (model.layers.empty()) return model_error(model, "the model has no layers");
  return Ok{};
}

// Exactly one loss, and it is the last layer.
Status check_loss(const Model& model, const std::vector<std::string>& labels) {
  LayerId first_loss = -1;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[l];
    if (layer.op != Op::softmax_xent) continue;
    if (first_loss >= 0)
      return Error{layer.where,
                   fmt::format("{}: a second loss layer (the first is '{}' at line {}); a model "
                               "has exactly one softmax_xent, its last layer",
                               labels[l], model.layers[first_loss].name,
                               model.layers[first_loss].where.line)};
    first_loss = l;
  }
  const Layer& last = model.layers.back();
  if (first_loss < 0)
    return Error{last.where,
                 fmt::format("the model has no loss: expected its last layer to be "
                             "{{op: softmax_xent}}, but the last layer '{}' is a {}",
                             last.name, op_name(last.op))};
  if (first_loss != static_cast<LayerId>(model.layers.size()) - 1)
    return Error{model.layers[first_loss].where,
                 fmt::format("{}: the loss must be the last layer, but '{}' follows it",
                             labels[first_loss], model.layers[first_loss + 1].name)};
  return Ok{};
}

// Every layer but the loss feeds a later layer: an output that reaches no loss
// would get no gradient, so its weights would be "trained" with a zero step.
Status check_every_output_used(const Model& model, const std::vector<std::string>& labels) {
  std::vector<bool> used(model.layers.size(), false);
  for (const Layer& layer : model.layers)
    for (LayerId from : layer.inputs)
      if (from >= 0) used[from] = true;
  for (LayerId l = 0; l + 1 < static_cast<LayerId>(model.layers.size()); ++l)
    if (!used[l])
      return Error{model.layers[l].where,
                   fmt::format("{}: its output is not used by any later layer, so it does not "
                               "reach the loss (remove it, or name it in a later layer's in:)",
                               labels[l])};
  return Ok{};
}

}  // namespace

std::string default_layer_label(const Layer& layer) {
  return fmt::format("layer '{}'", layer.name);
}

Status validate_model_labelled(Model& model, const std::vector<std::string>& given_labels) {
  std::vector<std::string> labels = given_labels;
  if (labels.size() != model.layers.size()) {
    labels.clear();
    for (const Layer& layer : model.layers) labels.push_back(default_layer_label(layer));
  }
  if (Status s = check_model_fields(model); !s) return s;

  std::unordered_map<std::string, LayerId> by_name;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[l];
    if (layer.name.empty())
      return Error{layer.where, fmt::format("layer #{} has no name", l + 1)};
    if (layer.name == "input")
      return Error{layer.where, fmt::format("{}: 'input' is reserved for the model's input",
                                            labels[l])};
    auto [it, inserted] = by_name.emplace(layer.name, l);
    if (!inserted)
      return Error{layer.where,
                   fmt::format("{}: duplicate layer name (also used by the layer at line {})",
                               labels[l], model.layers[it->second].where.line)};
  }
  if (Status s = check_loss(model, labels); !s) return s;

  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    Layer& layer = model.layers[l];
    std::vector<Shape> shapes;
    std::vector<std::string> names;
    for (LayerId from : layer.inputs) {
      if (from == kModelInput) {
        shapes.push_back(model.input);
        names.push_back("input");
      } else if (from >= 0 && from < l) {
        shapes.push_back(model.layers[from].output);
        names.push_back(model.layers[from].name);
      } else {
        return Error{layer.where,
                     fmt::format("{}: input id {} is not an earlier layer (layers must be in "
                                 "topological order; a later input would be a cycle)",
                                 labels[l], from)};
      }
    }
    ShapeOrMessage result = infer_output_shape(layer, shapes, names, model.classes);
    if (!result.ok()) return Error{layer.where, fmt::format("{}: {}", labels[l], result.error)};
    int64_t batch_elements = 0;
    if (__builtin_mul_overflow(result.shape.elements(), model.batch, &batch_elements) ||
        batch_elements > kMaxBatchElements)
      return Error{layer.where,
                   fmt::format("{}: its output {} times the batch {} is too large", labels[l],
                               result.shape.to_string(), model.batch)};
    layer.output = result.shape;
  }
  return check_every_output_used(model, labels);
}

Status validate_model(Model& model) { return validate_model_labelled(model, {}); }

}  // namespace mplan
