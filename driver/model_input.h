#pragma once
// The model a command reads: a model YAML file, or an ONNX file imported on
// the fly (frontend/onnx/onnx_import.h), so that `mplan compile model.onnx` works.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"

namespace mplan::driver {

struct ModelInput {
  Model model;
  std::string yaml;                // the model's YAML text (the file's, or the import's): compile copies it beside the plan
  std::vector<std::string> notes;  // what the ONNX import noted ("<path>: <note>")
};

// Loads `path` (read within kMaxModelFileBytes); an .onnx file is imported
// with the graph's batch (or `batch` when > 0, for graphs without a fixed one).
// `precision` (the command line's --precision) replaces the file's precision
// and math, in the model and in its YAML text alike.
Result<ModelInput> load_model_input(const std::string& path, int64_t batch,
                                    std::optional<Precision> precision = std::nullopt);

// The --precision flag's value, or a usage error naming the flag; nothing for "".
Result<std::optional<Precision>> precision_flag(const std::string& value);


}  // namespace mplan::driver
