#pragma once
// The model a command reads: a model YAML file, or an ONNX file imported on
// the fly (frontend/onnx/onnx_import.h), so `mplan compile model.onnx` works.

#include <cstdint>
#include <string>

#include "ops/model.h"

namespace mplan::cli {

struct ModelInput {
  Model model;
  std::string yaml;  // the model's YAML text (the file's, or the import's): compile copies it beside the plan
};

// Loads `path` (read within kMaxModelFileBytes, issue 12); an .onnx file is
// imported with the graph's batch (or `batch` when > 0, for graphs without a
// fixed one), its notes printed on stderr. Fails the command on any error.
ModelInput load_model_or_onnx(const std::string& path, int64_t batch);

}  // namespace mplan::cli
