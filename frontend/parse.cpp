#include "frontend/parse.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "frontend/block_expansion.h"
#include "core/input_file.h"
#include "frontend/shape_inference.h"
#include "frontend/validate.h"
#include "core/yaml_reader.h"

namespace mplan {
namespace {

const ExpressionParams kNoParams;

// "models/resnet50.yaml" -> "resnet50": the name of a model that has none.
std::string file_stem(const std::string& file) {
  std::string stem = std::filesystem::path(file).stem().string();
  return stem.empty() ? "model" : stem;
}

Shape read_input_shape(const MapReader& top) {
  if (!top.has("input")) top.fail(top.node(), "missing 'input' (the per-sample shape [C, H, W])");
  YAML::Node input = top.get("input");
  if (!input.IsSequence() || input.size() != 3)
    top.fail(input, fmt::format("input must be the per-sample shape [C, H, W], got {}{}",
                                describe_node(input),
                                input.IsSequence() ? fmt::format(" of {}", input.size()) : ""));
  Shape shape;
  for (const YAML::Node& dim : input) shape.dims.push_back(top.int_value(dim, "input", 1));
  if (!is_valid_size(shape))
    top.fail(input, fmt::format("input {} is too large (at most {} elements per sample)",
                                shape.to_string(), kMaxElements));
  return shape;
}

Optimizer read_optimizer(const MapReader& top) {
  Optimizer optimizer;
  if (!top.has("optimizer")) return optimizer;
  YAML::Node node = top.get("optimizer");
  if (!node.IsMap())
    top.fail(node, fmt::format("optimizer must be a map {{kind: sgd, lr: ..., momentum: ..., "
                               "weight_decay: ..., nesterov: ..., no_weight_decay: [...]}}, got {}",
                               describe_node(node)));
  MapReader reader(node, top.file(), "optimizer", kNoParams);
  optimizer.kind = reader.has("kind") ? reader.optional_string("kind", optimizer.kind) : optimizer.kind;
  if (optimizer.kind != "sgd" && optimizer.kind != "adamw")
    reader.fail(reader.get("kind"),
                fmt::format("kind '{}' is not supported (expected sgd or adamw)", optimizer.kind));
  if (optimizer.adamw()) {
    reader.check_keys({"kind", "lr", "betas", "eps", "weight_decay", "no_weight_decay"}, "adamw optimizer");
    // torch.optim.AdamW's defaults.
    optimizer.lr = 1e-3;
    optimizer.weight_decay = 1e-2;
    optimizer.momentum = 0;
    if (reader.has("betas")) {
      const YAML::Node betas = reader.get("betas");
      if (!betas.IsSequence() || betas.size() != 2)
        reader.fail(betas, fmt::format("betas must be [beta1, beta2], got {}", describe_node(betas)));
      for (size_t i = 0; i < 2; ++i) {
        double beta = -1;
        try {
          beta = betas[i].as<double>();
        } catch (const YAML::Exception&) {
        }
        if (!(beta >= 0 && beta < 1))
          reader.fail(betas[i], fmt::format("betas must be in [0, 1), got {}", describe_node(betas[i])));
        (i == 0 ? optimizer.beta1 : optimizer.beta2) = beta;
      }
    }
    optimizer.eps = reader.optional_double("eps", optimizer.eps);
    if (!(optimizer.eps > 0))
      reader.fail(reader.get("eps"), fmt::format("eps must be positive, got {}", optimizer.eps));
  } else {
    reader.check_keys({"kind", "lr", "momentum", "weight_decay", "nesterov", "no_weight_decay"}, "optimizer");
  }
  optimizer.lr = reader.optional_double("lr", optimizer.lr);
  if (!(optimizer.lr > 0)) reader.fail(reader.get("lr"), fmt::format("lr must be positive, got {}", optimizer.lr));
  optimizer.momentum = reader.optional_double("momentum", optimizer.momentum);
  if (!(optimizer.momentum >= 0 && optimizer.momentum < 1))
    reader.fail(reader.get("momentum"),
                fmt::format("momentum must be in [0, 1), got {}", optimizer.momentum));
  optimizer.weight_decay = reader.optional_double("weight_decay", optimizer.weight_decay);
  if (!(optimizer.weight_decay >= 0))
    reader.fail(reader.get("weight_decay"),
                fmt::format("weight_decay must be at least 0, got {}", optimizer.weight_decay));
  optimizer.nesterov = reader.optional_bool("nesterov", false);
  if (optimizer.nesterov && optimizer.momentum == 0)
    reader.fail(reader.get("nesterov"), "nesterov needs a momentum above 0 (as torch.optim.SGD)");
  if (reader.has("no_weight_decay")) {
    const YAML::Node list = reader.get("no_weight_decay");
    if (!list.IsSequence())
      reader.fail(list, fmt::format("no_weight_decay must be a list of bias and norm, got {}", describe_node(list)));
    for (const YAML::Node& item : list) {
      const std::string what = item.IsScalar() ? item.Scalar() : "";
      bool& excluded = what == "bias" ? optimizer.no_decay_biases : optimizer.no_decay_norms;
      if (what != "bias" && what != "norm")
        reader.fail(item, fmt::format("no_weight_decay: expected bias or norm, got {}", describe_node(item)));
      if (excluded) reader.fail(item, fmt::format("no_weight_decay: {} is given twice", what));
      excluded = true;
    }
  }
  return optimizer;
}

SourceLocation location_of_mark(const YAML::Mark& mark, const std::string& file) {
  if (mark.is_null() || mark.line < 0) return SourceLocation{file, 0, 0};
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

// Everything but the YAML syntax: throws InputError.
Model read_model(const YAML::Node& document, const std::string& file) {
  const std::string expected = "a model: a map with name, input, batch, classes and layers";
  if (!document.IsMap())
    fail_at(document, file, fmt::format("expected {}, got {}", expected, describe_node(document)));
  MapReader top(document, file, "", kNoParams);
  top.check_keys({"name", "input", "batch", "classes", "dtype", "precision", "math", "optimizer", "blocks", "layers"},
                 "model");
  Model model;
  model.source_file = file;
  model.name = top.optional_string("name", file_stem(file));
  model.input = read_input_shape(top);
  model.batch = top.required_int("batch", 1);
  model.classes = top.required_int("classes", 1);
  model.dtype = top.optional_string("dtype", "float32");
  if (model.dtype != "float32")
    top.fail(top.get("dtype"),
             fmt::format("dtype '{}' is not supported (expected float32)", model.dtype));
  model.math = top.optional_string("math", "default");
  if (model.math == "fp16" || model.math == "bf16")
    top.fail(top.get("math"), fmt::format("math '{}' needs 16-bit tensors: write 'precision: {}' instead (math is "
                                          "default, fp32 or tf32)",
                                          model.math, model.math));
  if (model.math != "default" && model.math != "fp32" && model.math != "tf32")
    top.fail(top.get("math"), fmt::format("math '{}' is not a math mode (expected default, fp32 or tf32)", model.math));
  if (top.has("precision")) {
    const std::string name = top.optional_string("precision", "fp32");
    const std::optional<Precision> precision = parse_precision(name);
    if (!precision)
      top.fail(top.get("precision"),
               fmt::format("precision '{}' is not one of fp32, tf32, bf16 and fp16", name));
    Status folded = apply_precision(model, *precision);
    if (!folded) top.fail(top.get("precision"), folded.error().message);
  }
  model.optimizer = read_optimizer(top);
  if (!top.has("layers")) top.fail(document, "missing 'layers' (the list of layers)");

  ExpandedLayers expanded = expand_layers(top.get("blocks"), top.get("layers"), file);
  model.layers = std::move(expanded.layers);
  Status valid = validate_model_labelled(model, expanded.labels);
  if (!valid) throw InputError{valid.error()};
  return model;
}

}  // namespace

Result<Model> parse_model(const std::string& yaml_text, const std::string& file) {
  Result<YAML::Node> document =
      load_yaml_document(yaml_text, file, "a model: a map with name, input, batch, classes and layers");
  if (!document) return document.error();
  try {
    return read_model(*document, file);
  } catch (const InputError& e) {
    return e.error;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on a wrong node type; every read checks the type first,
    // so this is a frontend bug, but the user still gets an error, not a crash.
    return Error{location_of_mark(e.mark, file), fmt::format("unexpected YAML content: {}", e.msg)};
  }
}

Result<Model> load_model(const std::string& path) {
  Result<std::string> text = read_input_file(path, "the model file", kMaxModelFileBytes);
  if (!text) return text.error();
  return parse_model(*text, path);
}

}  // namespace mplan
