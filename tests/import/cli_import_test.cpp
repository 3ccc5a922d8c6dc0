// `mplan import` and `mplan compile model.onnx` as a user runs them: the file
// written, and nothing written when a node cannot be imported.

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.h"
#include "tests/import/onnx_builder.h"

namespace mplan::cli_test {
namespace {

using onnx_test::GraphBuilder;

std::string small_net(bool with_unsupported) {
  GraphBuilder g;
  g.input("x", {4, 3, 8, 8});
  g.param("w", {6, 3, 3, 3});
  g.param("fc.weight", {10, 6});
  g.param("fc.bias", {10});
  g.node("Conv", {"x", "w"}, {"c"}, "/conv/Conv");
  g.node(with_unsupported ? "Selu" : "Relu", {"c"}, {"r"}, "/act");
  g.node("GlobalAveragePool", {"r"}, {"p"}, "/pool");
  auto* flat = g.node("Flatten", {"p"}, {"f"}, "/flatten");
  GraphBuilder::integer(flat, "axis", 1);
  auto* gemm = g.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"}, "/fc/Gemm");
  GraphBuilder::integer(gemm, "transB", 1);
  g.output("logits", {4, 10});
  return g.bytes();
}

class ImportCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mplan_import_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ImportCommand, WritesTheModelAndCompileTakesTheOnnxFile) {
  write_file(dir_ / "net.onnx", small_net(false));
  MplanRun r = run_mplan({"import", (dir_ / "net.onnx").string(), "-o", (dir_ / "net.yaml").string(), "--batch",
                          "16", "--lr", "0.05"},
                         dir_);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("imported 6 layers (232 parameters)"), std::string::npos) << r.out;
  const std::string yaml = read_file(dir_ / "net.yaml");
  EXPECT_NE(yaml.find("batch: 16"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("lr: 0.05"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("{name: conv/Conv, op: conv, out: 6, kernel: 3, bias: false}"), std::string::npos) << yaml;
  // The YAML and the ONNX file plan alike.
  MplanRun from_yaml = run_mplan({"compile", (dir_ / "net.yaml").string(), "--budget", "64MiB", "-o",
                                  (dir_ / "out_yaml").string(), "--target", "cpu"},
                                 dir_);
  ASSERT_EQ(from_yaml.exit_code, 0) << from_yaml.describe();
  MplanRun from_onnx = run_mplan({"compile", (dir_ / "net.onnx").string(), "--budget", "64MiB", "--batch", "16",
                                  "-o", (dir_ / "out_onnx").string(), "--target", "cpu"},
                                 dir_);
  ASSERT_EQ(from_onnx.exit_code, 0) << from_onnx.describe();
  EXPECT_TRUE(fs::exists(dir_ / "out_onnx" / "train.cpp"));
}

TEST_F(ImportCommand, AnUnsupportedNodeIsNamedAndNothingIsWritten) {
  write_file(dir_ / "net.onnx", small_net(true));
  MplanRun r = run_mplan({"import", (dir_ / "net.onnx").string(), "-o", (dir_ / "net.yaml").string()}, dir_);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("node '/act' (Selu, (no attributes)): mplan has no layer for the ONNX op Selu"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "net.yaml"));
  MplanRun compile = run_mplan({"compile", (dir_ / "net.onnx").string(), "--budget", "64MiB", "-o",
                                (dir_ / "out").string()},
                               dir_);
  EXPECT_EQ(compile.exit_code, 1) << compile.describe();
  EXPECT_FALSE(fs::exists(dir_ / "out" / "plan.json"));
}

TEST_F(ImportCommand, RefusesWhatIsNotAnOnnxModel) {
  write_file(dir_ / "net.onnx", "garbage");
  MplanRun r = run_mplan({"import", (dir_ / "net.onnx").string(), "-o", (dir_ / "net.yaml").string()}, dir_);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("not an ONNX model"), std::string::npos) << r.err;
  MplanRun yaml = run_mplan({"import", (dir_ / "net.yaml").string(), "-o", (dir_ / "x.yaml").string()}, dir_);
  EXPECT_EQ(yaml.exit_code, 1) << yaml.describe();
  EXPECT_NE(yaml.err.find("not an .onnx file"), std::string::npos) << yaml.err;
  MplanRun batch = run_mplan({"import", (dir_ / "net.onnx").string(), "-o", (dir_ / "x.yaml").string(), "--lr", "-1"},
                             dir_);
  EXPECT_EQ(batch.exit_code, 1) << batch.describe();
  EXPECT_NE(batch.err.find("--lr must be positive"), std::string::npos) << batch.err;
}

}  // namespace
}  // namespace mplan::cli_test
