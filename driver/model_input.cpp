#include "driver/model_input.h"

#include <yaml-cpp/yaml.h>

#include "core/input_file.h"
#include "core/yaml_reader.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"

namespace mplan::driver {

Result<std::optional<Precision>> precision_flag(const std::string& value) {
  if (value.empty()) return std::optional<Precision>{};
  const std::optional<Precision> p = parse_precision(value);
  if (!p)
    return Error{{"--precision", 0, 0}, "--precision '" + value + "' is not one of fp32, tf32, bf16 and fp16",
                 ErrorKind::usage};
  return std::optional<Precision>{*p};
}

namespace {

// The model YAML text with its precision replaced (and its math left out).
Result<std::string> with_precision(const std::string& yaml, Precision precision, const std::string& file) {
  Result<YAML::Node> loaded = load_yaml_document(yaml, file, "a model: a map with name, input, batch and layers");
  if (!loaded) return loaded.error();
  YAML::Node document = std::move(loaded).value();
  if (!document.IsMap()) return Error{{file, 0, 0}, "expected a model: a map with name, input, batch and layers"};
  try {
    document.remove("math");
    document["precision"] = precision_name(precision);
    YAML::Emitter out;
    out << document;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return Error{{file, 0, 0}, "cannot write the model with --precision: " + e.msg};
  }
}

// The model parsed from the user's text (errors at its lines); with a
// precision, that precision in the model and in the text written beside the plan.
Result<ModelInput> with_text(const std::string& text, const std::string& path, std::optional<Precision> precision) {
  Result<Model> model = parse_model(text, path);
  if (!model) return model.error();
  ModelInput input{std::move(model).value(), text, {}};
  if (!precision) return input;
  if (Status replaced = apply_precision(input.model, *precision, /*replace=*/true); !replaced) return replaced.error();
  Result<std::string> rewritten = with_precision(text, *precision, path);
  if (!rewritten) return rewritten.error();
  input.yaml = std::move(rewritten).value();
  return input;
}

}  // namespace

Result<ModelInput> load_model_input(const std::string& path, int64_t batch, std::optional<Precision> precision) {
  if (!onnx_import::is_onnx_path(path)) {
    Result<std::string> read = read_input_file(path, "the model file", kMaxModelFileBytes);
    if (!read) return read.error();
    return with_text(*read, path, precision);
  }
  onnx_import::ImportOptions options;
  options.batch = batch;
  options.precision = precision;
  Result<onnx_import::ImportResult> imported = onnx_import::import_onnx(path, options);
  if (!imported) return imported.error();
  Result<ModelInput> input = with_text(imported->yaml, path, std::nullopt);
  if (!input) return input.error();
  input->model.source_file = path;
  for (const std::string& note : imported->notes) input->notes.push_back(path + ": " + note);
  return input;
}

}  // namespace mplan::driver
