// --precision on the commands that read a model (docs/model-format.md,
// `precision`): bounds and compare plan 16-bit models; compile writes their
// programs for both targets (CUDA's with a warning: ops other than
// convolutions and linear layers compute between casts, whose scratch lies
// beyond the budget), and replaces the model's
// precision, in its copy too, for fp32 and tf32.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

class PrecisionFlag : public MplanTest {};

std::string example_profile(const std::string& name) {
  return (fs::path(example_model("cifar_small")).parent_path().parent_path() / "profiles" / name).string();
}

TEST_F(PrecisionFlag, BoundsCountSixteenBitActivations) {
  auto peak = [&](const std::string& precision) {
    const MplanRun run = mplan({"bounds", example_model("cifar_resnet"), "--json", "--precision", precision});
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    const nlohmann::json j = nlohmann::json::parse(run.out);
    EXPECT_EQ(j["precision"], precision);
    return j["liveness_peak_bytes"].get<int64_t>() - j["weight_bytes"].get<int64_t>();
  };
  const int64_t fp32 = peak("fp32"), bf16 = peak("bf16"), fp16 = peak("fp16");
  EXPECT_EQ(bf16, fp16);
  EXPECT_LT(bf16, fp32 * 55 / 100);
  EXPECT_GT(bf16, fp32 * 45 / 100);
}

TEST_F(PrecisionFlag, AnUnknownValueIsAUsageError) {
  for (const char* command : {"bounds", "compare", "compile"}) {
    std::vector<std::string> args = {command, example_model("cifar_small"), "--precision", "fp8"};
    if (std::string(command) != "bounds") args.insert(args.end(), {"--budget", "64MiB"});
    if (std::string(command) == "compile") args.insert(args.end(), {"-o", path("out")});
    const MplanRun run = mplan(args);
    EXPECT_NE(run.exit_code, 0) << run.describe();
    EXPECT_TRUE(contains(run.err, "--precision 'fp8' is not one of fp32, tf32, bf16 and fp16")) << run.describe();
  }
  EXPECT_FALSE(fs::exists(path("out")));
}

// A 16-bit program is written for either target; CUDA's calls the 16-bit
// convolution and says that the other ops compute in float between casts,
// and what that costs.
TEST_F(PrecisionFlag, CompileWritesSixteenBitProgramsForBothTargets) {
  write_file(path("m.yaml"), read_file(example_model("cifar_small")) + "precision: bf16\n");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{path("m.yaml")}, {example_model("cifar_small"), "--precision", "fp16"}}) {
    std::vector<std::string> args = {"compile"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--device", "h100", "--budget", "64MiB", "-o", path("out"), "--target", "cuda"});
    const MplanRun cuda = mplan(args);
    EXPECT_EQ(cuda.exit_code, 0) << cuda.describe();
    const std::string program = read_file(path("out/train.cpp"));
    EXPECT_TRUE(contains(program, ".target = \"cuda\"")) << "not the CUDA program";
    EXPECT_TRUE(contains(program, "cast_to_float(")) << "a 16-bit program casts";
    EXPECT_TRUE(contains(cuda.out + cuda.err, "convolutions and linear layers run 16-bit kernels")) << cuda.describe();
    EXPECT_TRUE(contains(program, "conv_forward_16(")) << "CUDA calls the 16-bit convolution";
    EXPECT_TRUE(std::regex_search(cuda.out + cuda.err, std::regex(R"(float scratch \([0-9.]+ [KM]iB\) is device )")))
        << cuda.describe();
    fs::remove_all(path("out"));
    args.back() = "cpu";
    const MplanRun cpu = mplan(args);
    EXPECT_EQ(cpu.exit_code, 0) << cpu.describe();
    EXPECT_TRUE(contains(read_file(path("out/train.cpp")), "cast_to_float(")) << "a 16-bit program casts";
    EXPECT_FALSE(contains(cpu.out + cpu.err, "between casts")) << "the CPU backend is the reference";
    fs::remove_all(path("out"));
  }
}

// The default device has no 16-bit arithmetic: the message says what to give.
TEST_F(PrecisionFlag, TheDefaultDeviceRefusesSixteenBitsWithAHint) {
  const MplanRun run = mplan({"compile", example_model("cifar_small"), "--precision", "bf16", "--budget", "64MiB",
                              "-o", path("out")});
  EXPECT_NE(run.exit_code, 0) << run.describe();
  EXPECT_TRUE(contains(run.err, "k40 is the default device: give a GPU with bf16 tensor cores, e.g. --device h100"))
      << run.describe();
  EXPECT_FALSE(fs::exists(path("out")));
}

// A 16-bit model's weight copies: resident where that is fastest, made where
// each task uses them where only that fits; the plan says which, verify and
// bounds know it. (A model of large linear layers: the copies are 9 MiB.)
TEST_F(PrecisionFlag, WeightCopiesAreResidentOrMadeWhereUsedByCost) {
  write_file(path("mlp.yaml"),
             "name: mlp\ninput: [3, 8, 8]\nbatch: 8\nclasses: 10\nprecision: bf16\nlayers:\n"
             "  - {name: flat, op: flatten}\n  - {name: fc1, op: linear, out: 2048}\n  - {name: act1, op: relu}\n"
             "  - {name: fc2, op: linear, out: 2048}\n  - {name: act2, op: relu}\n"
             "  - {name: fc3, op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n");
  auto compile_at = [&](const std::string& budget) {
    const MplanRun run = mplan({"compile", path("mlp.yaml"), "--device", "h100", "--budget", budget, "--plan-only",
                                "-o", path("out-" + budget)});
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    const MplanRun verified = mplan({"verify", path("out-" + budget)});
    EXPECT_EQ(verified.exit_code, 0) << verified.describe();
    return run;
  };
  // Room for everything: resident copies, no cast per use.
  const MplanRun roomy = compile_at("1GiB");
  EXPECT_TRUE(std::regex_search(roomy.out, std::regex(R"(weight copies: 16-bit, resident, remade by the update \()"
                                                      R"([0-9.]+ ms against [0-9.]+ ms made where used\))")))
      << roomy.describe();
  EXPECT_FALSE(contains(read_file(path("out-1GiB/plan.json")), "weight_copies"));
  // 61 MiB: the resident copies leave no room (61.59 MiB at least); made where used, 60.79 MiB.
  const MplanRun tight = compile_at("61MiB");
  EXPECT_TRUE(contains(tight.out, "weight copies: 16-bit, made where each task uses them (not resident) (resident "
                                  "copies do not fit)"))
      << tight.describe();
  EXPECT_TRUE(contains(read_file(path("out-61MiB/plan.json")), "\"weight_copies\": \"where_used\""));
  const MplanRun bounds = mplan({"bounds", path("mlp.yaml")});
  EXPECT_TRUE(contains(bounds.out, "Mmin (moDNN)    61.59 MiB (64578304 B)")) << bounds.describe();
  EXPECT_TRUE(contains(bounds.out, "copies where used  weights 52.78 MiB (55345272 B), Mmin 60.79 MiB (63746816 B)"))
      << bounds.describe();
  // A hand-edited plan: a value that is not a way, and copies made where used
  // for a float32 model, which keeps none, are refused by name.
  std::string text = read_file(path("out-61MiB/plan.json"));
  text.replace(text.find("\"where_used\""), 12, "\"sometimes\"");
  write_file(path("out-61MiB/plan.json"), text);
  const MplanRun odd = mplan({"verify", path("out-61MiB")});
  EXPECT_NE(odd.exit_code, 0) << odd.describe();
  EXPECT_TRUE(contains(odd.err, "'sometimes' is not resident or where_used")) << odd.describe();
  const MplanRun fp32 = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--plan-only", "-o",
                               path("fp32")});
  ASSERT_EQ(fp32.exit_code, 0) << fp32.describe();
  text = read_file(path("fp32/plan.json"));
  text.replace(text.find("\"compact_backward\""), 0, "\"weight_copies\": \"where_used\", ");
  write_file(path("fp32/plan.json"), text);
  const MplanRun none_kept = mplan({"verify", path("fp32")});
  EXPECT_NE(none_kept.exit_code, 0) << none_kept.describe();
  EXPECT_TRUE(contains(none_kept.err, "but model 'cifar_small' keeps none (precision fp32)")) << none_kept.describe();
  // Below both: the message gives both minimums.
  const MplanRun none = mplan({"compile", path("mlp.yaml"), "--device", "h100", "--budget", "60MiB", "--plan-only",
                               "-o", path("out-60MiB")});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_TRUE(contains(none.err, "with the 16-bit weight copies made where they are used instead of resident: "
                                 "budget 62914560 bytes (60.00 MiB) is below the minimum 63746816 bytes (60.79 MiB)"))
      << none.describe();
}

// --plan-only: a 16-bit plan, verified, without a program; its blocks are
// half the bytes of the fp32 plan's where autocast makes them 16-bit.
TEST_F(PrecisionFlag, PlanOnlyWritesAVerifiedSixteenBitPlan) {
  auto plan_at = [&](const std::string& precision, const std::string& budget, const std::string& dir) {
    const MplanRun run = mplan({"compile", example_model("cifar_small"), "--precision", precision, "--device", "h100",
                                "--budget", budget, "--plan-only", "-o", path(dir)});
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_TRUE(contains(run.out, "program: none (--plan-only)")) << run.describe();
    EXPECT_TRUE(fs::exists(path(dir + "/plan.json")));
    EXPECT_FALSE(fs::exists(path(dir + "/train.cpp")));
    const MplanRun verified = mplan({"verify", path(dir)});
    EXPECT_EQ(verified.exit_code, 0) << verified.describe();
    return nlohmann::json::parse(read_file(path(dir + "/plan.json")));
  };
  const nlohmann::json fp32 = plan_at("fp32", "1GiB", "fp32");
  const nlohmann::json bf16 = plan_at("bf16", "1GiB", "bf16");
  auto buffer_bytes = [](const nlohmann::json& plan, const std::string& block) {
    const auto& names = plan["block_names"];
    for (const auto& b : plan["buffers"])
      if (b["block"].get<int>() >= 0 && names[b["block"].get<size_t>()] == block) return b["bytes"].get<int64_t>();
    return int64_t{-1};
  };
  // A 16-bit plan names each block's type; an fp32 plan, all float32, does not.
  EXPECT_FALSE(fp32.contains("block_types"));
  ASSERT_TRUE(bf16.contains("block_types"));
  const auto& names = bf16["block_names"];
  for (size_t b = 0; b < names.size(); ++b) {
    if (names[b] == "Y[conv1+relu1]") EXPECT_EQ(bf16["block_types"][b], "bfloat16");
    if (names[b] == "X") EXPECT_EQ(bf16["block_types"][b], "float32");
  }
  ASSERT_GT(buffer_bytes(fp32, "Y[conv1+relu1]"), 0);
  EXPECT_EQ(buffer_bytes(bf16, "Y[conv1+relu1]") * 2, buffer_bytes(fp32, "Y[conv1+relu1]"));
  EXPECT_EQ(buffer_bytes(bf16, "X"), buffer_bytes(fp32, "X"));
  // A plan that offloads (one round at a budget below its need) verifies too.
  const MplanRun tight = mplan({"compile", example_model("cifar_resnet"), "--precision", "bf16", "--device", "h100",
                                "--budget", "35MiB", "--batchnorm", "one", "--plan-only", "-o", path("tight")});
  ASSERT_EQ(tight.exit_code, 0) << tight.describe();
  EXPECT_GT(nlohmann::json::parse(read_file(path("tight/plan.json")))["summary"]["offload_count"].get<int>(), 0);
  const MplanRun verified = mplan({"verify", path("tight")});
  EXPECT_EQ(verified.exit_code, 0) << verified.describe();
  // The verifier checks the types against the model, the reader their names.
  std::string text = read_file(path("bf16/plan.json"));
  text.replace(text.find("\"bfloat16\""), 10, "\"float16\"");
  write_file(path("bf16/plan.json"), text);
  const MplanRun wrong = mplan({"verify", path("bf16")});
  EXPECT_NE(wrong.exit_code, 0) << wrong.describe();
  EXPECT_TRUE(contains(wrong.out + wrong.err, "block_types[")) << wrong.describe();
  text.replace(text.find("\"float16\""), 9, "\"fp8\"");
  write_file(path("bf16/plan.json"), text);
  const MplanRun unknown = mplan({"verify", path("bf16")});
  EXPECT_NE(unknown.exit_code, 0) << unknown.describe();
  EXPECT_TRUE(contains(unknown.err, "is 'fp8', not a type")) << unknown.describe();
  const MplanRun both = mplan({"compile", example_model("cifar_small"), "--budget", "64MiB", "--plan-only", "--build",
                               "-o", path("both")});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  EXPECT_TRUE(contains(both.err, "--plan-only and --build exclude each other")) << both.describe();
}

// Every policy plans a 16-bit model, and every plan passes the verifier.
TEST_F(PrecisionFlag, EveryPolicysSixteenBitPlanPassesTheVerifier) {
  const MplanRun run = mplan({"compare", example_model("cifar_resnet"), "--precision", "bf16", "--device", "h100",
                              "--budget", "35MiB", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  int feasible = 0;
  const nlohmann::json compared = nlohmann::json::parse(run.out);
  for (const auto& p : compared.at("policies")) {
    if (!p["feasible"].get<bool>()) continue;
    ++feasible;
    EXPECT_EQ(p["violations"].get<int>(), 0) << p["policy"] << ": " << p.value("first_violation", "");
  }
  EXPECT_GE(feasible, 8);
}

TEST_F(PrecisionFlag, CompileReplacesThePrecisionInTheModelCopy) {
  const MplanRun run = mplan({"compile", example_model("cifar_small"), "--precision", "tf32", "--device", "h100",
                              "--budget", "64MiB", "-o", path("out")});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  const nlohmann::json plan = nlohmann::json::parse(read_file(path("out/plan.json")));
  EXPECT_EQ(plan["cost_model"]["math_mode"], "tf32");
  EXPECT_TRUE(contains(read_file(path("out/model.yaml")), "precision: tf32"));
  const MplanRun verified = mplan({"verify", path("out")});
  EXPECT_EQ(verified.exit_code, 0) << verified.describe();
}

// A 16-bit model is profiled as its program runs it: the CUDA job file
// calls the 16-bit convolutions and linear layers between casts, the CPU's
// the float kernels; a CPU-measured profile is in the model's precision, and
// compile takes it without a precision warning.
TEST_F(PrecisionFlag, ProfileTimesSixteenBitModelsAsTheirProgramsRunThem) {
  const MplanRun cuda = mplan({"profile", example_model("cifar_small"), "--precision", "bf16", "--backend", "cuda",
                               "--jobs", path("cuda-jobs.json")});
  ASSERT_EQ(cuda.exit_code, 0) << cuda.describe();
  const std::string cuda_jobs = read_file(path("cuda-jobs.json"));
  EXPECT_TRUE(contains(cuda_jobs, "\"math\": \"bf16\"")) << cuda_jobs.substr(0, 200);
  EXPECT_TRUE(contains(cuda_jobs, "\"conv_forward_16\""));
  EXPECT_TRUE(contains(cuda_jobs, "\"cast_to_float\""));
  EXPECT_FALSE(contains(cuda_jobs, "\"conv_forward\""));
  const MplanRun cpu = mplan({"profile", example_model("cifar_small"), "--precision", "bf16", "--backend", "cpu",
                              "--jobs", path("cpu-jobs.json")});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.describe();
  const std::string cpu_jobs = read_file(path("cpu-jobs.json"));
  EXPECT_TRUE(contains(cpu_jobs, "\"conv_forward\""));
  EXPECT_FALSE(contains(cpu_jobs, "\"conv_forward_16\""));

  const MplanRun measured = mplan({"profile", example_model("cifar_small"), "--precision", "bf16", "--backend",
                                   "cpu", "--sub-batches", "8,32", "-o", path("profile.json")});
  ASSERT_EQ(measured.exit_code, 0) << measured.describe();
  const nlohmann::json profile = nlohmann::json::parse(read_file(path("profile.json")));
  EXPECT_EQ(profile["math"], "bf16");
  const MplanRun compiled = mplan({"compile", example_model("cifar_small"), "--precision", "bf16", "--profile",
                                   path("profile.json"), "--budget", "64MiB", "-o", path("out")});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.describe();
  EXPECT_FALSE(contains(compiled.err, "the profile was measured in")) << compiled.describe();
  EXPECT_FALSE(contains(compiled.err, "the CPU backend computes in fp32")) << compiled.describe();
  EXPECT_TRUE(contains(compiled.out, "math bf16")) << compiled.describe();
  // Another precision than the profile's is planned with a warning.
  const MplanRun other = mplan({"compile", example_model("cifar_small"), "--precision", "fp16", "--profile",
                                path("profile.json"), "--budget", "64MiB", "-o", path("out16")});
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_TRUE(contains(other.err, "is precision fp16, but the profile was measured in bf16")) << other.describe();
}

// The model is read as written: an error names its line in the user's file.
TEST_F(PrecisionFlag, ErrorsPointIntoTheUsersFile) {
  write_file(path("bad.yaml"), "# a comment\n\nname: bad\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n"
                               "  - {op: conv, out: 4, kernel: 3}\n  - {op: frobnicate}\n");
  const MplanRun run = mplan({"bounds", path("bad.yaml"), "--precision", "bf16"});
  EXPECT_NE(run.exit_code, 0) << run.describe();
  EXPECT_TRUE(contains(run.err, "bad.yaml:9:")) << run.describe();
}

TEST_F(PrecisionFlag, CompareWarnsWhenTheProfileWasMeasuredInFloat32) {
  const MplanRun run = mplan({"compare", example_model("cifar_small"), "--precision", "bf16", "--profile",
                              example_profile("cifar_small-h200.json"), "--budget", "64MiB", "--policies",
                              "ideal,mplan"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_TRUE(contains(run.err, "is precision bf16, but the profile was measured in fp32")) << run.describe();
  EXPECT_TRUE(contains(run.out, "model cifar_small (batch 32, precision bf16)")) << run.describe();
  const MplanRun json = mplan({"compare", example_model("cifar_small"), "--precision", "fp16", "--device", "h100",
                               "--budget", "64MiB", "--policies", "ideal,mplan", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  EXPECT_EQ(nlohmann::json::parse(json.out)["precision"], "fp16");
}

}  // namespace
}  // namespace mplan::cli_test
