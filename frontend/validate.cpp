#include "frontend/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <unordered_map>

#include "frontend/parse.h"
#include "frontend/shape_inference.h"

namespace mplan {
namespace {

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
  if (is_16_bit(model.precision) ? model.math != precision_name(model.precision)
                                  : model.math != "default" && model.math != "fp32" && model.math != "tf32")
    return model_error(model, fmt::format("math '{}' is not supported at precision {} (expected {})", model.math,
                                          precision_name(model.precision),
                                          is_16_bit(model.precision) ? precision_name(model.precision)
                                                                     : "default, fp32 or tf32"));
  if (model.optimizer.kind != "sgd" && !model.optimizer.adamw())
    return model_error(model, fmt::format("optimizer kind '{}' is not supported (expected sgd or adamw)",
                                          model.optimizer.kind));
  // AdamW's bias correction counts the iteration's updates; fp16 skips
  // overflowed updates, which PyTorch's GradScaler does not count.
  if (model.optimizer.adamw() && model.precision == Precision::fp16)
    return model_error(model, "optimizer adamw with precision fp16 is not supported: its step count would include "
                              "the updates the loss scaling skips (use bf16, which needs no loss scaling)");
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
  if (Status s = check_batch(model, model.batch, "batch"); !s) return s;
  return check_every_output_used(model, labels);
}

Status check_batch(const Model& model, int64_t batch, const std::string& what) {
  auto failure = [&](std::string message) {
    return Error{SourceLocation{what == "batch" ? model.source_file : std::string(), 0, 0}, std::move(message)};
  };
  if (batch < 1 || batch > kMaxSizeField)
    return failure(fmt::format("{} must be between 1 and {} samples, got {}", what, kMaxSizeField, batch));
  // Elements per sample of the input, of every layer output and of every
  // conv layer's unfolded input (the im2col buffer of GEMM algorithms, C x R
  // x S x P x Q), summed; saturating.
  auto add = [](int64_t& sum, int64_t more) {
    if (__builtin_add_overflow(sum, more, &sum)) sum = INT64_MAX;
  };
  auto product = [](std::initializer_list<int64_t> factors) {
    int64_t p = 1;
    for (int64_t f : factors)
      if (f < 0 || __builtin_mul_overflow(p, f, &p)) return INT64_MAX;
    return p;
  };
  int64_t per_sample = 1;
  for (int64_t d : model.input.dims)
    if (d < 1 || __builtin_mul_overflow(per_sample, d, &per_sample)) per_sample = INT64_MAX;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[l];
    int64_t e = 1;
    for (int64_t d : layer.output.dims)
      if (d < 1 || __builtin_mul_overflow(e, d, &e)) e = INT64_MAX;
    add(per_sample, e);
    if (layer.op == Op::conv && layer.output.dims.size() == 3 && !layer.inputs.empty()) {
      const Shape& in = model.input_shape(l);
      add(per_sample, product({in.dims.at(0), layer.window.kernel_h, layer.window.kernel_w, layer.output.dims[1],
                               layer.output.dims[2]}));
    }
  }
  int64_t total = 0;
  if (__builtin_mul_overflow(per_sample, batch, &total) || total > kMaxBatchElements)
    return failure(fmt::format("{} {} is too large for this model: its input, layer outputs and conv "
                               "workspaces would hold {} elements per sample x {} samples, more than the 2^58 "
                               "elements (1 EiB of float32) mplan computes with; the largest {} for this model is {}",
                               what, batch, per_sample, batch, what,
                               std::min(kMaxSizeField, kMaxBatchElements / per_sample)));
  return Ok{};
}

Status validate_model(Model& model) { return validate_model_labelled(model, {}); }

}  // namespace mplan
