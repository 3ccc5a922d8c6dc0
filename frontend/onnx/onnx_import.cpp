// `mplan import`'s entry points (onnx_import.h): read, translate, and check
// the written model with the frontend before handing it out.

#include "frontend/onnx/onnx_import.h"

#include <fmt/format.h>

#include <sstream>
#include <stdexcept>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/translator.h"
#include "frontend/parse.h"

namespace mplan::onnx_import {
namespace {

Result<ImportResult> import_graph(const Result<Graph>& graph, const std::string& file, const ImportOptions& options) {
  if (!graph.ok()) return graph.error();
  Translator translator(graph.value(), options, file);
  Result<ImportResult> result = Error{{file, 0, 0}, ""};
  try {
    result = translator.run();
  } catch (const std::exception& e) {  // a file past every check (memory, say): an error, not a crash
    return Error{{file, 0, 0}, fmt::format("cannot import the graph: {}", e.what())};
  }
  if (!result.ok()) return result;
  // The written text must be a model: a failure here is the importer's bug,
  // said with the text's place so that it can be found.
  Result<Model> model = parse_model(result->yaml, file + " (as imported)");
  if (!model.ok()) {
    // The line it names, so that the report shows what was written.
    std::string line;
    std::istringstream lines(result->yaml);
    for (int k = 0; k < model.error().where.line && std::getline(lines, line); ++k) {
    }
    return Error{{file, 0, 0}, fmt::format("the model written from the graph does not validate (if the ONNX file is "
                                           "a valid model, this is an importer bug: please report it with the "
                                           "file): {}\n  the line: {}",
                                           model.error().to_string(), line)};
  }
  if (model->parameter_count() != result->onnx_parameters)
    result->notes.push_back(fmt::format("the model has {} parameters, the ONNX parameters its layers use {}",
                                        model->parameter_count(), result->onnx_parameters));
  return result;
}

}  // namespace

bool is_onnx_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Result<ImportResult> import_onnx(const std::string& path, const ImportOptions& options) {
  return import_graph(read_onnx(path), path, options);
}

Result<ImportResult> import_onnx_bytes(const std::string& bytes, const std::string& file,
                                       const ImportOptions& options) {
  return import_graph(parse_onnx(bytes, file), file, options);
}

}  // namespace mplan::onnx_import
