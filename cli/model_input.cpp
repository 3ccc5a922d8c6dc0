#include "cli/model_input.h"

#include <fmt/format.h>

#include "cli/command.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"

namespace mplan::cli {

Model load_model_or_onnx(const std::string& path, int64_t batch) {
  if (!onnx_import::is_onnx_path(path)) return unwrap(load_model(path));
  onnx_import::ImportOptions options;
  options.batch = batch;
  const onnx_import::ImportResult imported = unwrap(onnx_import::import_onnx(path, options));
  for (const std::string& note : imported.notes) fmt::print(stderr, "note: {}: {}\n", path, note);
  Model model = unwrap(parse_model(imported.yaml, path));
  model.source_file = path;
  return model;
}

}  // namespace mplan::cli
