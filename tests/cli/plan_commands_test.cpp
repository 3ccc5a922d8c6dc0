// `mplan compile`, `mplan verify` and `mplan inspect` as a user runs them:
// exit codes, messages, and the files written (or not written).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandRun run(const std::string& arguments) {
  CommandRun r;
  const std::string command = std::string(MPLAN_EXE) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string model(const std::string& stem) {
  return std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml";
}

// A fresh folder under the temporary directory, removed at the end of the test.
class PlanCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mplan_cli_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// cifar_small needs 13.1 MiB at its liveness peak and 1.1 MiB at moDNN's minimum; 3 MiB offloads.
constexpr const char* kBudget = "3MiB";

TEST_F(PlanCommands, CompileWritesPlanTraceAndSvgWithTheDefaultDevice) {
  const CommandRun c = run("compile " + model("cifar_small") + " --budget " + kBudget + " -o " + path("out"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("device: k40 (default; use --device to choose)"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("no violations"), std::string::npos) << c.output;
  for (const char* file : {"plan.json", "trace.json", "memory.svg"})
    EXPECT_TRUE(fs::exists(path("out") + "/" + file)) << file;
  const nlohmann::json trace = nlohmann::json::parse(read(path("out/trace.json")));
  EXPECT_TRUE(trace["traceEvents"].is_array());
  const nlohmann::json plan = nlohmann::json::parse(read(path("out/plan.json")));
  EXPECT_EQ(plan["format"], "mplan-plan");
  EXPECT_EQ(plan["budget_bytes"], 3 << 20);
  EXPECT_FALSE(plan["task_names"].empty());
  EXPECT_EQ(read(path("out/memory.svg")).rfind("<svg", 0), 0u);
  // No temporary files left behind.
  for (const auto& entry : fs::directory_iterator(path("out")))
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
}

TEST_F(PlanCommands, CompileWithDeviceAndFlags) {
  const CommandRun c = run("compile " + model("cifar_small") + " --budget 4MiB --device p100 --copy-engines 1 --batch 16 -o " +
                    path("out"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("device: p100"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find("default"), std::string::npos) << c.output;
  const nlohmann::json plan = nlohmann::json::parse(read(path("out/plan.json")));
  EXPECT_EQ(plan["copy_engines"], 1);
  EXPECT_EQ(plan["batch"], 16);
}

TEST_F(PlanCommands, CompileWithARecordedProfile) {
  ASSERT_EQ(run("profile " + model("cifar_small") + " --device titanx -o " + path("profile.json")).exit_code, 0);
  const CommandRun c = run("compile " + model("cifar_small") + " --budget 3MiB --profile " + path("profile.json") +
                           " -o " + path("out"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("device: titanx (recorded profile"), std::string::npos) << c.output;
  EXPECT_TRUE(fs::exists(path("out/plan.json")));
  const CommandRun both = run("compile " + model("cifar_small") + " --budget 3MiB --device k40 --profile " +
                              path("profile.json") + " -o " + path("out2"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("exclude each other"), std::string::npos) << both.output;
  EXPECT_FALSE(fs::exists(path("out2/plan.json")));
  const CommandRun other = run("compile " + model("every_op") + " --budget 64MiB --profile " + path("profile.json") +
                               " -o " + path("out3"));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("does not cover"), std::string::npos) << other.output;
  EXPECT_FALSE(fs::exists(path("out3/plan.json")));
}

TEST_F(PlanCommands, VerifyAcceptsACompiledPlanAndRejectsACorruptedOne) {
  ASSERT_EQ(run("compile " + model("cifar_small") + " --budget " + kBudget + " -o " + path("out")).exit_code, 0);
  CommandRun v = run("verify " + path("out/plan.json") + " --model " + model("cifar_small"));
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(v.output.rfind("plan OK: ", 0), 0u) << v.output;
  v = run("verify " + path("out") + " --model " + model("cifar_small"));  // the folder works too
  EXPECT_EQ(v.exit_code, 0) << v.output;

  // Shrink the budget and drop the first wait: two violations, both listed.
  nlohmann::json plan = nlohmann::json::parse(read(path("out/plan.json")));
  plan["budget_bytes"] = 1 << 20;
  for (auto& step : plan["steps"]) {
    if (step["kind"] == "compute" && step.contains("waits")) {
      step.erase("waits");
      break;
    }
  }
  std::ofstream(path("bad.json")) << plan.dump();
  v = run("verify " + path("bad.json") + " --model " + model("cifar_small"));
  EXPECT_EQ(v.exit_code, 1) << v.output;
  EXPECT_NE(v.output.find("plan: budget:"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("unprefetched"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("mplan: error:"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("violation"), std::string::npos) << v.output;
}

// The evaluation plan beside the program: the forward pass alone, on the
// training plan's resident buffers, verified against the evaluation graph
// (and refused as a training step's plan).
TEST_F(PlanCommands, TheEvaluationPlanIsVerifiedAsTheForwardPassAlone) {
  const CommandRun c = run("compile " + model("cifar_small") + " --budget " + kBudget + " --target cpu -o " +
                           path("out"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("evaluation: batch "), std::string::npos) << c.output;
  const nlohmann::json evaluation = nlohmann::json::parse(read(path("out/evaluation-plan.json")));
  const nlohmann::json training = nlohmann::json::parse(read(path("out/plan.json")));
  EXPECT_EQ(evaluation["graph"], "evaluation");
  EXPECT_FALSE(training.contains("graph"));
  for (const auto& name : evaluation["task_names"]) EXPECT_EQ(name.get<std::string>().rfind("FP(", 0), 0u) << name;
  EXPECT_EQ(evaluation["resident_region_bytes"], training["resident_region_bytes"]);
  CommandRun v = run("verify " + path("out/evaluation-plan.json"));
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(v.output.rfind("plan OK: ", 0), 0u) << v.output;
  nlohmann::json as_training = evaluation;
  as_training.erase("graph");
  std::ofstream(path("out/as-training.json")) << as_training.dump();
  v = run("verify " + path("out/as-training.json"));
  EXPECT_EQ(v.exit_code, 1) << v.output;
}

TEST_F(PlanCommands, VerifyRefusesAnotherModel) {
  ASSERT_EQ(run("compile " + model("cifar_small") + " --budget " + kBudget + " -o " + path("out")).exit_code, 0);
  const CommandRun v = run("verify " + path("out/plan.json") + " --model " + model("every_op"));
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.output.find("digest"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("cifar_small"), std::string::npos) << v.output;
}

TEST_F(PlanCommands, TheMemorySavingVariantsTravelWithThePlan) {
  // cifar_small's ReLUs before its max pools take their compact backward: the
  // plan names them, and verify builds the TDFG they make.
  CommandRun c = run("compile " + model("cifar_small") + " --budget " + kBudget + " -o " + path("out"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("memory-saving variants: compact backward of "), std::string::npos) << c.output;
  nlohmann::json plan = nlohmann::json::parse(read(path("out/plan.json")));
  ASSERT_TRUE(plan["compact_backward"].is_array());
  ASSERT_FALSE(plan["compact_backward"].empty());
  EXPECT_EQ(run("verify " + path("out")).exit_code, 0);

  // Without them the plan is another TDFG's: verify finds its blocks wrong.
  nlohmann::json plain = plan;
  plain["compact_backward"] = nlohmann::json::array();
  std::ofstream(path("out/plain.json")) << plain.dump();
  CommandRun v = run("verify " + path("out/plain.json"));
  EXPECT_EQ(v.exit_code, 1) << v.output;

  // A layer the model lacks, one with no compact form, a list that is not one.
  for (const auto& [value, expected] : std::vector<std::pair<nlohmann::json, std::string>>{
           {nlohmann::json::array({"no_such_layer"}), "'no_such_layer', which the model does not have"},
           {nlohmann::json::array({"conv1"}), "without a compact backward"},
           {nlohmann::json("relu1"), "compact_backward"},
           {nlohmann::json::array({7}), "compact_backward[0]"}}) {
    nlohmann::json bad = plan;
    bad["compact_backward"] = value;
    std::ofstream(path("out/bad.json")) << bad.dump();
    v = run("verify " + path("out/bad.json"));
    EXPECT_NE(v.exit_code, 0) << value.dump();
    EXPECT_NE(v.output.find(expected), std::string::npos) << value.dump() << ": " << v.output;
    EXPECT_EQ(v.output.find("internal"), std::string::npos) << v.output;
  }

  c = run("compile " + model("cifar_small") + " --budget " + kBudget + " --no-memory-saving-variants -o " +
          path("plain"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(c.output.find("memory-saving variants"), std::string::npos) << c.output;
  EXPECT_TRUE(nlohmann::json::parse(read(path("plain/plan.json")))["compact_backward"].empty());
  c = run("compile " + model("cifar_small") + " --budget " + kBudget + " --policy vdnn-all-m "
          "--no-memory-saving-variants -o " + path("vdnn"));
  EXPECT_EQ(c.exit_code, 2) << c.output;
  EXPECT_NE(c.output.find("--no-memory-saving-variants is an option of the planner"), std::string::npos) << c.output;
}

TEST_F(PlanCommands, VerifyAndInspectRefuseBadFiles) {
  std::ofstream(path("junk.json")) << "{ not json";
  CommandRun v = run("verify " + path("junk.json") + " --model " + model("cifar_small"));
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.output.find("not a valid JSON"), std::string::npos) << v.output;
  v = run("inspect " + path("junk.json"));
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.output.find("junk.json:1:"), std::string::npos) << v.output;
  v = run("inspect " + path("missing"));
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.output.find("cannot read"), std::string::npos) << v.output;
}

TEST_F(PlanCommands, InspectSummarisesThePlan) {
  ASSERT_EQ(run("compile " + model("cifar_small") + " --budget " + kBudget + " -o " + path("out")).exit_code, 0);
  for (const std::string& extra : {std::string(), " --model " + model("cifar_small")}) {
    const CommandRun r = run("inspect " + path("out") + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* text : {"model         cifar_small", "device        analytic (k40", "sub-batch",
                             "budget        3.00 MiB", "overhead", "to host", "to device", "stalls", "planner",
                             "notes", "FP(conv1)", "BP2(conv1)", "update", "-> "}) {
      EXPECT_NE(r.output.find(text), std::string::npos) << "missing '" << text << "' in\n" << r.output;
    }
  }
}

// A recomputation runs a forward task again in the backward pass; inspect
// counts it in its task's row and also apart (runs, time, the wait before
// it), so that a wait for a recomputation's input is not read as the
// forward pass's. cifar_resnet in one round of 20 MiB recomputes.
TEST_F(PlanCommands, InspectCountsRecomputationsApart) {
  ASSERT_EQ(run("compile " + model("cifar_resnet") + " --budget 20MiB --batchnorm one -o " + path("out")).exit_code,
            0);
  const nlohmann::json plan = nlohmann::json::parse(read(path("out/plan.json")));
  std::map<std::string, int> want;  // task name -> recompute steps
  for (const nlohmann::json& step : plan["steps"])
    if (step.value("recompute", false)) ++want[plan["task_names"][step["task"].get<size_t>()].get<std::string>()];
  ASSERT_FALSE(want.empty()) << "the plan recomputes nothing";
  const CommandRun r = run("inspect " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("recomputed: runs, ms, stall ms"), std::string::npos) << r.output;
  std::map<std::string, int> got;
  const std::regex row(R"(^(\S+)\s.*\s(\d+), ([0-9.]+), ([0-9.]+|-)\s)");
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) got[m[1]] = std::stoi(m[2]);
  }
  EXPECT_EQ(got, want) << r.output;
}

// Bad flags: a clear message, a non-zero exit, and nothing written.
TEST_F(PlanCommands, CompileRefusesBadFlagsAndWritesNothing) {
  struct Case {
    std::string flags;
    std::string message;
  };
  const std::string m = model("cifar_small");
  for (const Case& c : {Case{"--budget abc", "--budget 'abc'"}, Case{"--budget 0", "more than 0"},
                        Case{"--budget 3MiB --copy-engines 3", "--copy-engines must be 1"},
                        Case{"--budget 3MiB --batch 0", "--batch must be a positive"},
                        Case{"--budget 3MiB --device nosuchgpu", "nosuchgpu"},
                        Case{"--budget 100KiB", "minimum"}}) {
    SCOPED_TRACE(c.flags);
    const std::string out = path("out");
    const CommandRun r = run("compile " + m + " " + c.flags + " -o " + out);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("mplan: error:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out + "/plan.json"));
    EXPECT_FALSE(fs::exists(out + "/trace.json"));
  }
  const CommandRun missing = run("compile " + path("nosuch.yaml") + " --budget 3MiB -o " + path("out"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_FALSE(fs::exists(path("out/plan.json")));
}

}  // namespace
