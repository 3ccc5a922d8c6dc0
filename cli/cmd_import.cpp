// `mplan import model.onnx -o model.yaml [--batch B] [--input NAME] [--output NAME]
//  [--classes K] [--name NAME] [--lr X] [--momentum M] [--weight-decay W] [--precision P]`:
// writes the model YAML of an ONNX graph (docs/import.md): its layers, the
// loss on its logits and the optimizer. When any node cannot be imported,
// every such node is listed and nothing is written.

#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/command.h"
#include "driver/model_input.h"
#include "frontend/onnx/onnx_import.h"

namespace mplan::cli {
namespace {

struct ImportFlags {
  std::string onnx_path, out_path, precision;
  onnx_import::ImportOptions options;
};

void run_import(const ImportFlags& f) {
  if (!onnx_import::is_onnx_path(f.onnx_path))
    fail(fmt::format("'{}' is not an .onnx file (mplan import reads ONNX models; models in PyTorch go through "
                     "tools/mplan_export.py)",
                     f.onnx_path));
  const Optimizer& o = f.options.optimizer;
  if (!(o.lr > 0)) fail(fmt::format("--lr must be positive, got {}", o.lr));
  if (!(o.momentum >= 0 && o.momentum < 1)) fail(fmt::format("--momentum must be in [0, 1), got {}", o.momentum));
  if (!(o.weight_decay >= 0)) fail(fmt::format("--weight-decay must be at least 0, got {}", o.weight_decay));
  if (f.options.batch < 0) fail(fmt::format("--batch must be at least 1, got {}", f.options.batch));
  if (f.options.classes < 0) fail(fmt::format("--classes must be at least 1, got {}", f.options.classes));
  onnx_import::ImportOptions options = f.options;
  options.precision = unwrap(driver::precision_flag(f.precision));
  const onnx_import::ImportResult result = unwrap(onnx_import::import_onnx(f.onnx_path, options));
  write_file_atomically(f.out_path, result.yaml);
  for (const std::string& note : result.notes) fmt::print(stderr, "note: {}\n", note);
  fmt::print("imported {} layers ({} parameters) from {} into {}\n", result.layers, result.onnx_parameters,
             f.onnx_path, f.out_path);
}

void setup_import(CLI::App& command) {
  auto f = std::make_shared<ImportFlags>();
  command.add_option("model", f->onnx_path, "ONNX file (exported by torch.onnx.export, docs/import.md)")->required();
  command.add_option("-o,--out", f->out_path, "The model YAML to write")->required();
  command.add_option("--batch", f->options.batch, "Mini-batch size (default: the graph input's batch dimension)");
  command.add_option("--input", f->options.input, "The image input (default: the graph's only image input)");
  command.add_option("--output", f->options.output, "The logits (default: the graph's first output)");
  command.add_option("--classes", f->options.classes, "Number of classes (default: the size of the logits)");
  command.add_option("--name", f->options.name, "The model's name (default: the file name)");
  command.add_option("--lr", f->options.optimizer.lr, "SGD learning rate (default 0.01)");
  command.add_option("--momentum", f->options.optimizer.momentum, "SGD momentum (default 0.9)");
  command.add_option("--weight-decay", f->options.optimizer.weight_decay, "SGD weight decay (default 0)");
  command.add_option("--precision", f->precision,
                     "The model's precision: fp32, tf32, bf16 or fp16 (docs/model-format.md; default: fp16 or bf16 "
                     "for a graph whose image input is, else none written)");
  command.callback([f] { run_import(*f); });
}

const Registration registration("import", "Import an ONNX model into model YAML (docs/import.md)", setup_import, 10);

}  // namespace
}  // namespace mplan::cli
