#include "driver/model_input.h"

#include <yaml-cpp/yaml.h>

#include "core/input_file.h"
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

Result<std::string> with_precision(const std::string& yaml, Precision precision, const std::string& file) {
  try {
    YAML::Node document = YAML::Load(yaml);
    if (!document.IsMap()) return Error{{file, 0, 0}, "expected a model: a map with name, input, batch and layers"};
    document.remove("math");
    document["precision"] = precision_name(precision);
    YAML::Emitter out;
    out << document;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return Error{{file, e.mark.line + 1, e.mark.column + 1}, e.msg};
  }
}

Result<ModelInput> load_model_input(const std::string& path, int64_t batch, std::optional<Precision> precision) {
  if (!onnx_import::is_onnx_path(path)) {
    Result<std::string> read = read_input_file(path, "the model file", kMaxModelFileBytes);
    if (!read) return read.error();
    std::string text = std::move(read).value();
    if (precision) {
      Result<std::string> rewritten = with_precision(text, *precision, path);
      if (!rewritten) return rewritten.error();
      text = std::move(rewritten).value();
    }
    Result<Model> model = parse_model(text, path);
    if (!model) return model.error();
    return ModelInput{std::move(model).value(), std::move(text), {}};
  }
  onnx_import::ImportOptions options;
  options.batch = batch;
  Result<onnx_import::ImportResult> imported = onnx_import::import_onnx(path, options);
  if (!imported) return imported.error();
  if (precision) {
    Result<std::string> rewritten = with_precision(imported->yaml, *precision, path);
    if (!rewritten) return rewritten.error();
    imported->yaml = std::move(rewritten).value();
  }
  Result<Model> model = parse_model(imported->yaml, path);
  if (!model) return model.error();
  ModelInput input{std::move(model).value(), imported->yaml, {}};
  input.model.source_file = path;
  for (const std::string& note : imported->notes) input.notes.push_back(path + ": " + note);
  return input;
}

}  // namespace mplan::driver
