// tools/mplan_export.py as a user runs it: the model YAML and the --weights
// folder, which must hold exactly the tensors the generated program's --load
// reads, each with its layer's name and PyTorch's shape (docs/generated-program.md,
// "Checkpoints"); and an export that fails names every op it cannot export.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ops/op_table.h"
#include "frontend/parse.h"
#include "runtime/npy.h"

namespace mplan {
namespace {

namespace fs = std::filesystem;

bool have_torchvision() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch, torchvision' > /dev/null 2>&1") == 0;
  return ok;
}

struct ShellRun {
  int exit_code = -1;
  std::string output;
};

ShellRun run(const std::string& command) {
  ShellRun r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path fresh_dir(const std::string& tag) {
  const fs::path dir = fs::path(MPLAN_BINARY_DIR) / "import-work" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const std::string kExporter = std::string(MPLAN_SOURCE_DIR) + "/tools/mplan_export.py";

// Every parameter and buffer tensor of every layer has its file with its shape, and nothing else is there.
void expect_weights_folder(const Model& model, const fs::path& weights) {
  size_t expected = 0;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[static_cast<size_t>(l)];
    const OpSpec& spec = op_spec(layer.op);
    std::vector<LayerTensor> tensors;
    if (spec.parameters) tensors = spec.parameters(layer, model.input_shapes(l));
    if (spec.buffers)
      for (const LayerTensor& t : spec.buffers(layer, model.input_shapes(l))) tensors.push_back(t);
    for (const LayerTensor& t : tensors) {
      const fs::path file = weights / (layer.name + "." + t.name + ".npy");
      rt::NpyArray array;
      std::string error;
      ASSERT_TRUE(rt::npy_read(file.string(), &array, &error)) << file << ": " << error;
      EXPECT_EQ(array.shape, t.shape) << file;
      ++expected;
    }
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(weights)) files += entry.path().extension() == ".npy";
  EXPECT_EQ(files, expected) << "the folder holds tensors no layer has";
}

TEST(Exporter, WritesTheModelAndTheLoadFolderOfATorchvisionModel) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 lacks torch or torchvision";
  const fs::path dir = fresh_dir("exporter-mobilenet");
  const ShellRun r = run("/usr/bin/python3 " + kExporter + " torchvision:mobilenet_v3_small --input 3,64,64 --batch 16 -o " +
                    (dir / "m.yaml").string() + " --weights " + (dir / "w").string() + " --names " +
                    (dir / "names.json").string() + " --lr 0.05");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Model> model = load_model((dir / "m.yaml").string());
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  EXPECT_EQ(model->batch, 16);
  EXPECT_DOUBLE_EQ(model->optimizer.lr, 0.05);
  EXPECT_EQ(model->parameter_count(), 2542856);  // torchvision's mobilenet_v3_small
  expect_weights_folder(*model, dir / "w");
  std::ifstream names(dir / "names.json");
  const std::string text((std::istreambuf_iterator<char>(names)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"features.0.0.weight\": \"features_0_0.weight\""), std::string::npos) << text.substr(0, 400);
}

TEST(Exporter, AModuleFromAFileWithAttentionAndItsWeights) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 lacks torch or torchvision";
  const fs::path dir = fresh_dir("exporter-vit");
  const ShellRun r = run("/usr/bin/python3 " + kExporter + " " + MPLAN_SOURCE_DIR +
                    "/tests/e2e/vision_models.py:Vit --input 3,16,16 --batch 4 -o " + (dir / "v.yaml").string() +
                    " --weights " + (dir / "w").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Model> model = load_model((dir / "v.yaml").string());
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  expect_weights_folder(*model, dir / "w");
}

TEST(Exporter, WritesThePrecisionAskedFor) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 lacks torch or torchvision";
  const fs::path dir = fresh_dir("exporter-precision");
  const ShellRun r = run("/usr/bin/python3 " + kExporter + " " + MPLAN_SOURCE_DIR +
                         "/tests/e2e/vision_models.py:Vit --input 3,16,16 --batch 4 --precision bf16 -o " +
                         (dir / "v.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Model> model = load_model((dir / "v.yaml").string());
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  EXPECT_EQ(model->precision, Precision::bf16);
  const ShellRun refused = run("/usr/bin/python3 " + kExporter + " " + MPLAN_SOURCE_DIR +
                               "/tests/e2e/vision_models.py:Vit --input 3,16,16 --batch 4 --precision fp8 -o " +
                               (dir / "w.yaml").string());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--precision: invalid choice: 'fp8'"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "w.yaml"));
}

TEST(Exporter, EveryOpItCannotExportIsNamedAndNothingIsWritten) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 lacks torch or torchvision";
  const fs::path dir = fresh_dir("exporter-refused");
  std::ofstream(dir / "net.py") << "import torch.nn as nn\n"
                                   "def make():\n"
                                   "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.LeakyReLU(), nn.Conv2d(4, 4, 3),\n"
                                   "                         nn.ELU(), nn.Flatten(), nn.Linear(64, 2))\n";
  const ShellRun r = run("/usr/bin/python3 " + kExporter + " " + (dir / "net.py").string() +
                    ":make --input 3,8,8 --batch 2 -o " + (dir / "net.yaml").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("2 ops cannot be exported"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a module of type LeakyReLU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a module of type ELU"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "net.yaml"));
}

}  // namespace
}  // namespace mplan
