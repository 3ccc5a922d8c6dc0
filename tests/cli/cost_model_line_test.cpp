// `mplan compile` and `mplan inspect` say which cost model planned (an
// analytic prediction with its expected error, or a measurement) and the math
// mode; plan.json records both; a model's `math` is checked against the GPU.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

class CostModelLine : public MplanTest {};

const char* kSmallModel = R"(name: small
input: [3, 16, 16]
batch: 4
classes: 10
MATH
layers:
  - {op: conv, out: 8, kernel: 3, pad: 1}
  - {op: relu}
  - {op: flatten}
  - {op: linear, out: 10}
  - {op: softmax_xent}
)";

std::string small_model(const std::string& math_line) {
  std::string text = kSmallModel;
  text.replace(text.find("MATH"), 4, math_line);
  return text;
}

TEST_F(CostModelLine, CompileAndInspectSayItIsAnAnalyticPredictionWithItsError) {
  const MplanRun compiled =
      mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "-o", (dir_ / "out").string()});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.describe();
  EXPECT_NE(compiled.out.find("cost model: analytic prediction (not a measurement), math fp32; expected error: "
                              "architecture kepler: conv tasks median"),
            std::string::npos)
      << compiled.out;
  const MplanRun inspected = mplan({"inspect", (dir_ / "out").string()});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.describe();
  EXPECT_NE(inspected.out.find("cost model    analytic prediction"), std::string::npos) << inspected.out;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir_ / "out" / "plan.json"));
  EXPECT_EQ(plan["cost_model"]["kind"], "analytic");
  EXPECT_EQ(plan["cost_model"]["math_mode"], "fp32");
  EXPECT_NE(plan["cost_model"]["expected_error"].get<std::string>().find("median"), std::string::npos);
}

TEST_F(CostModelLine, TheMathModeIsTheGpusDefaultOrTheModels) {
  write_file(dir_ / "default.yaml", small_model(""));
  write_file(dir_ / "fp32.yaml", small_model("math: fp32"));
  write_file(dir_ / "tf32.yaml", small_model("math: tf32"));
  auto math_of = [&](const std::string& model, const std::string& device) {
    const fs::path out = dir_ / (model + "_" + device);
    const MplanRun r = mplan(std::vector<std::string>{"compile", (dir_ / (model + ".yaml")).string(), "--budget", "1GiB",
                                                      "--device", device, "-o", out.string()});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    if (r.exit_code != 0) return std::string();
    return nlohmann::json::parse(read_file(out / "plan.json"))["cost_model"]["math_mode"].get<std::string>();
  };
  EXPECT_EQ(math_of("default", "a100-80gb"), "tf32");  // cuDNN's and PyTorch's default on Ampere
  EXPECT_EQ(math_of("default", "v100"), "fp32");
  EXPECT_EQ(math_of("fp32", "a100-80gb"), "fp32");
  EXPECT_EQ(math_of("tf32", "h100"), "tf32");
  // A mode the GPU does not have: a clear error naming both, nothing written.
  const MplanRun refused = mplan({"compile", (dir_ / "tf32.yaml").string(), "--budget", "1GiB", "--device", "v100",
                                  "-o", (dir_ / "refused").string()});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("asks for math tf32, which v100 does not have (its math modes: fp32, fp16)"),
            std::string::npos)
      << refused.describe();
  EXPECT_FALSE(fs::exists(dir_ / "refused" / "plan.json"));
  // 16-bit math is the 16-bit precision's: said where.
  write_file(dir_ / "fp16.yaml", small_model("math: fp16"));
  const MplanRun fp16 = mplan({"compile", (dir_ / "fp16.yaml").string(), "--budget", "1GiB", "-o",
                               (dir_ / "fp16").string()});
  EXPECT_NE(fp16.exit_code, 0);
  EXPECT_NE(fp16.err.find("fp16.yaml:5:7: math 'fp16' needs 16-bit tensors: write 'precision: fp16' instead"),
            std::string::npos)
      << fp16.describe();
  write_file(dir_ / "bad.yaml", small_model("math: fast"));
  const MplanRun bad = mplan({"compile", (dir_ / "bad.yaml").string(), "--budget", "1GiB", "-o", (dir_ / "bad").string()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("math 'fast' is not a math mode"), std::string::npos) << bad.describe();
}

// A recorded profile's times are in its own math: a plan from it says that
// math, and a model asking for another one is told so, not silently re-priced.
TEST_F(CostModelLine, APlanFromAProfileHasTheProfilesMathAndSaysWhenTheModelAskedForAnother) {
  write_file(dir_ / "tf32.yaml", small_model("math: tf32"));
  write_file(dir_ / "default.yaml", small_model(""));
  const fs::path profile = dir_ / "a100-tf32.json";
  const MplanRun profiled = mplan({"profile", (dir_ / "default.yaml").string(), "--device", "a100-80gb", "-o",
                                   profile.string()});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.describe();
  EXPECT_EQ(nlohmann::json::parse(read_file(profile))["math"], "tf32");  // the A100's default
  const MplanRun same = mplan({"compile", (dir_ / "tf32.yaml").string(), "--profile", profile.string(), "--budget",
                               "1GiB", "-o", (dir_ / "same").string()});
  ASSERT_EQ(same.exit_code, 0) << same.describe();
  EXPECT_EQ(same.err.find("asks for math"), std::string::npos) << same.describe();
  EXPECT_EQ(nlohmann::json::parse(read_file(dir_ / "same" / "plan.json"))["cost_model"]["math_mode"], "tf32");

  write_file(dir_ / "fp32.yaml", small_model("math: fp32"));
  const MplanRun other = mplan({"compile", (dir_ / "fp32.yaml").string(), "--profile", profile.string(), "--budget",
                                "1GiB", "-o", (dir_ / "other").string()});
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_NE(other.err.find("asks for math fp32, but the profile's times are in tf32"), std::string::npos)
      << other.describe();
  EXPECT_EQ(nlohmann::json::parse(read_file(dir_ / "other" / "plan.json"))["cost_model"]["math_mode"], "tf32");
}

}  // namespace
}  // namespace mplan::cli_test
