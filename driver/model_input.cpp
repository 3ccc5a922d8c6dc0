#include "driver/model_input.h"

#include "core/input_file.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"

namespace mplan::driver {

Result<ModelInput> load_model_input(const std::string& path, int64_t batch) {
  if (!onnx_import::is_onnx_path(path)) {
    Result<std::string> text = read_input_file(path, "the model file", kMaxModelFileBytes);
    if (!text) return text.error();
    Result<Model> model = parse_model(*text, path);
    if (!model) return model.error();
    return ModelInput{std::move(model).value(), std::move(text).value(), {}};
  }
  onnx_import::ImportOptions options;
  options.batch = batch;
  Result<onnx_import::ImportResult> imported = onnx_import::import_onnx(path, options);
  if (!imported) return imported.error();
  Result<Model> model = parse_model(imported->yaml, path);
  if (!model) return model.error();
  ModelInput input{std::move(model).value(), imported->yaml, {}};
  input.model.source_file = path;
  for (const std::string& note : imported->notes) input.notes.push_back(path + ": " + note);
  return input;
}

}  // namespace mplan::driver
