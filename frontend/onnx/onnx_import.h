#pragma once
// `mplan import`: an ONNX inference graph (as PyTorch's torch.onnx.export
// writes it) to mplan's model YAML (docs/import.md). Each ONNX node becomes
// an mplan layer named after it, or folds into one (Identity, Dropout in
// eval mode, shape arithmetic, reshapes and transposes, a bias Add into its
// MatMul, the element-wise pieces of SiLU and GELU, PyTorch's attention
// into one attention layer); the loss (softmax cross-entropy on the logits)
// and the optimizer are appended. Every node that cannot be imported is
// reported, all of them in one error, and nothing is written.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"

namespace mplan::onnx_import {

struct ImportOptions {
  int64_t batch = 0;        // the mini-batch; 0: the graph input's batch dimension (if fixed)
  std::string input;        // the image input; "": the graph's only non-parameter input
  std::string output;       // the logits; "": the graph's first output
  int64_t classes = 0;      // 0: the size of the logits; else checked against it
  std::string name;         // the model's name; "": the file name's stem
  Optimizer optimizer;      // written as the model's optimizer
  // Written as the model's precision; none: a float16 (bfloat16) image input
  // makes it fp16 (bf16), else none is written (fp32 tensors).
  std::optional<Precision> precision;
};

struct ImportResult {
  std::string yaml;                 // the model file
  std::vector<std::string> notes;   // what was folded, dropped or assumed, for the user
  int64_t onnx_parameters = 0;      // elements of the ONNX parameters the layers use
  int64_t layers = 0;               // layers written, the loss included
};

// Imports the ONNX file at `path`. The YAML parses with parse_model (it is
// checked so before it is returned).
Result<ImportResult> import_onnx(const std::string& path, const ImportOptions& options);
// The same from the file's bytes (`file` names it in messages).
Result<ImportResult> import_onnx_bytes(const std::string& bytes, const std::string& file,
                                       const ImportOptions& options);

// Whether a path names an ONNX file (by its extension, ".onnx").
bool is_onnx_path(const std::string& path);

}  // namespace mplan::onnx_import
