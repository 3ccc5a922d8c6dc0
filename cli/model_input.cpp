#include "cli/model_input.h"

#include <fmt/format.h>

#include "cli/command.h"
#include "core/input_file.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"

namespace mplan::cli {

ModelInput load_model_or_onnx(const std::string& path, int64_t batch) {
  if (!onnx_import::is_onnx_path(path)) {
    std::string text = unwrap(read_input_file(path, "the model file", kMaxModelFileBytes));
    Model model = unwrap(parse_model(text, path));
    return {std::move(model), std::move(text)};
  }
  onnx_import::ImportOptions options;
  options.batch = batch;
  const onnx_import::ImportResult imported = unwrap(onnx_import::import_onnx(path, options));
  for (const std::string& note : imported.notes) fmt::print(stderr, "note: {}: {}\n", path, note);
  Model model = unwrap(parse_model(imported.yaml, path));
  model.source_file = path;
  return {std::move(model), imported.yaml};
}

}  // namespace mplan::cli
