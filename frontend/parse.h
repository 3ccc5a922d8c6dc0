#pragma once
// The frontend: model YAML text -> validated Model (docs/model-format.md).

#include <string>

#include "core/error.h"
#include "ops/model.h"

namespace mplan {

// Parses and validates a model. `file` names the text in error messages.
// Every error names file, line and column and says what was expected.
Result<Model> parse_model(const std::string& yaml_text, const std::string& file);

// Reads `path` and parses it; a missing or unreadable file is an Error.
Result<Model> load_model(const std::string& path);

// Recomputes output shapes from scratch and checks every rule of the format
// (used by parse_model, and by code that builds a Model directly, e.g. tests).
Status validate_model(Model& model);

}  // namespace mplan
