// `mplan bounds` as a user runs it: the four bounds in text and JSON,
// the per-layer table, --batch, --device, and every way the input can be bad.
// Also the top level of `mplan`: no sub-command, --version, --help.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "frontend/parse.h"
#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

// One bound printed as "label   7.50 GiB (8053063680 B)  ...".
struct PrintedBytes {
  bool found = false;
  double value = 0;  // the number before the unit
  std::string unit;  // B, KiB, MiB, GiB or TiB
  int64_t bytes = 0;
};

// The first line of `text` that starts with `label`, parsed.
PrintedBytes printed_bytes(const std::string& text, const std::string& label) {
  static const std::regex kBytes(R"(^\s+([0-9]+(?:\.[0-9]+)?) (B|KiB|MiB|GiB|TiB) \(([0-9]+) B\))");
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(label, 0) != 0) continue;
    std::smatch match;
    const std::string rest = line.substr(label.size());
    if (!std::regex_search(rest, match, kBytes)) return {};
    return {true, std::stod(match[1]), match[2], std::stoll(match[3])};
  }
  return {};
}

// The human-readable figure agrees with the exact byte count (to its rounding).
void expect_units_agree(const PrintedBytes& p, const std::string& label) {
  ASSERT_TRUE(p.found) << label;
  const std::map<std::string, double> scale{
      {"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const double in_unit = static_cast<double>(p.bytes) / scale.at(p.unit);
  EXPECT_NEAR(p.value, in_unit, 0.006 * std::max(1.0, in_unit)) << label;
  // The unit is the largest that keeps the figure at least 1 (or bytes).
  if (p.unit != "B") EXPECT_GE(in_unit, 0.995) << label;
  if (p.unit != "TiB") EXPECT_LT(in_unit, 1024.0) << label;
}

const char* const kBoundLabels[] = {"weights", "naive", "liveness peak", "Mmin (moDNN)"};

class Bounds : public MplanTest {};

TEST_F(Bounds, PrintsEveryBoundInBytesAndBinaryUnits) {
  const MplanRun r = mplan({"bounds", example_model("vgg16")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.err.empty()) << r.describe();
  std::map<std::string, int64_t> bytes;
  for (const char* label : kBoundLabels) {
    const PrintedBytes p = printed_bytes(r.out, label);
    ASSERT_TRUE(p.found) << "no '" << label << "' line with bytes\n" << r.describe();
    expect_units_agree(p, label);
    bytes[label] = p.bytes;
  }
  // What the bounds mean orders them: weights are resident in every bound,
  // moDNN's minimum (sub-batch 1) cannot exceed the full-batch liveness peak,
  // which cannot exceed having every block at once.
  EXPECT_GT(bytes["weights"], 0);
  EXPECT_LT(bytes["weights"], bytes["Mmin (moDNN)"]);
  EXPECT_LE(bytes["Mmin (moDNN)"], bytes["liveness peak"]);
  EXPECT_LT(bytes["liveness peak"], bytes["naive"]);
  // VGG-16 has 138.4 M parameters: W and dW alone are over 1 GiB of float32.
  EXPECT_GE(bytes["weights"], int64_t{2} * 138'000'000 * 4);
  EXPECT_TRUE(contains(r.out, "vgg16")) << r.out;
  // Without --device there are no ideal-run figures.
  EXPECT_FALSE(contains(r.out, "ideal")) << r.out;
}

TEST_F(Bounds, JsonHasTheSameNumbersAsTheText) {
  const MplanRun text = mplan({"bounds", example_model("vgg16")});
  const MplanRun json = mplan({"bounds", example_model("vgg16"), "--json"});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(json.out)) << json.out;
  const std::pair<const char*, const char*> fields[] = {{"weights", "weight_bytes"},
                                                        {"naive", "naive_bytes"},
                                                        {"liveness peak", "liveness_peak_bytes"},
                                                        {"Mmin (moDNN)", "modnn_min_bytes"}};
  for (const auto& [label, key] : fields) {
    ASSERT_TRUE(j.contains(key)) << key << "\n" << json.out;
    ASSERT_TRUE(j[key].is_number_integer()) << key;
    EXPECT_EQ(j[key].get<int64_t>(), printed_bytes(text.out, label).bytes) << key;
  }
  EXPECT_EQ(j["model"], "vgg16");
  EXPECT_TRUE(j["batch"].is_number_integer());
  EXPECT_GT(j["parameters"].get<int64_t>(), 138'000'000);
  EXPECT_TRUE(contains(text.out, std::to_string(j["parameters"].get<int64_t>()))) << text.out;
  EXPECT_TRUE(j["liveness_peak_task"].is_string());
  EXPECT_TRUE(j["modnn_min_task"].is_string());
  EXPECT_FALSE(j.contains("layers"));
  EXPECT_FALSE(j.contains("ideal_time_ms"));
}

TEST_F(Bounds, LayersPrintsOneRowPerLayer) {
  Result<Model> model = load_model(example_model("vgg16"));
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const MplanRun r = mplan({"bounds", example_model("vgg16"), "--layers"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // The bounds are still there, and then a table with a header and one row
  // per layer, in the model's order, each row starting with the layer's name.
  for (const char* label : kBoundLabels) EXPECT_TRUE(printed_bytes(r.out, label).found) << label;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line) && line.rfind("layer ", 0) != 0) {
  }
  ASSERT_EQ(line.rfind("layer ", 0), 0u) << "no table header\n" << r.out;
  EXPECT_TRUE(contains(line, "forward") && contains(line, "backward")) << line;
  size_t rows = 0;
  while (std::getline(lines, line) && !line.empty()) {
    ASSERT_LT(rows, model.value().layers.size()) << "extra row: " << line;
    const Layer& layer = model.value().layers[rows];
    EXPECT_EQ(line.rfind(layer.name + " ", 0), 0u) << "row " << rows << ": " << line;
    EXPECT_TRUE(contains(line, op_name(layer.op))) << line;
    ++rows;
  }
  EXPECT_EQ(rows, model.value().layers.size());

  // --json --layers: the same rows as JSON.
  const MplanRun j = mplan({"bounds", example_model("vgg16"), "--layers", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.describe();
  const nlohmann::json out = nlohmann::json::parse(j.out);
  ASSERT_TRUE(out["layers"].is_array());
  ASSERT_EQ(out["layers"].size(), model.value().layers.size());
  int64_t parameters = 0;
  for (size_t i = 0; i < out["layers"].size(); ++i) {
    EXPECT_EQ(out["layers"][i]["name"], model.value().layers[i].name);
    parameters += out["layers"][i]["parameters"].get<int64_t>();
  }
  EXPECT_EQ(parameters, out["parameters"].get<int64_t>());
}

TEST_F(Bounds, SmallerBatchGivesSmallerNaiveAndTheSameWeights) {
  const MplanRun full = mplan({"bounds", example_model("vgg16"), "--json"});
  const MplanRun one = mplan({"bounds", example_model("vgg16"), "--json", "--batch", "1"});
  ASSERT_EQ(full.exit_code, 0) << full.describe();
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  const nlohmann::json f = nlohmann::json::parse(full.out), o = nlohmann::json::parse(one.out);
  ASSERT_GT(f["batch"].get<int64_t>(), 1);
  EXPECT_EQ(o["batch"], 1);
  EXPECT_LT(o["naive_bytes"].get<int64_t>(), f["naive_bytes"].get<int64_t>());
  EXPECT_LT(o["liveness_peak_bytes"].get<int64_t>(), f["liveness_peak_bytes"].get<int64_t>());
  EXPECT_EQ(o["weight_bytes"], f["weight_bytes"]);
  // moDNN's minimum is at sub-batch 1 whatever the batch.
  EXPECT_EQ(o["modnn_min_bytes"], f["modnn_min_bytes"]);
  // The text says which batch it used.
  const MplanRun text = mplan({"bounds", example_model("vgg16"), "--batch", "1"});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_EQ(printed_bytes(text.out, "naive").bytes, o["naive_bytes"].get<int64_t>());
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"((^|\n)batch\s+1\n)"))) << text.out;
}

TEST_F(Bounds, DeviceAddsTheIdealTimeAndMemory) {
  const MplanRun r = mplan({"bounds", example_model("vgg16"), "--device", "k40"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"((^|\n)ideal time\s+[0-9]+\.[0-9]+ ms)"))) << r.out;
  const PrintedBytes ideal_memory = printed_bytes(r.out, "ideal memory");
  ASSERT_TRUE(ideal_memory.found) << r.out;
  expect_units_agree(ideal_memory, "ideal memory");
  EXPECT_TRUE(contains(r.out, "k40")) << r.out;

  const MplanRun j = mplan({"bounds", example_model("vgg16"), "--device", "k40", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.describe();
  const nlohmann::json out = nlohmann::json::parse(j.out);
  ASSERT_TRUE(out["ideal_time_ms"].is_number()) << j.out;
  EXPECT_GT(out["ideal_time_ms"].get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(out["ideal_time_ms"].get<double>()));
  EXPECT_EQ(out["ideal_peak_bytes"].get<int64_t>(), ideal_memory.bytes);
  // The ideal run has the whole batch in memory and the fastest algorithms'
  // workspaces: at least the zero-workspace liveness peak.
  EXPECT_GE(out["ideal_peak_bytes"].get<int64_t>(), out["liveness_peak_bytes"].get<int64_t>());
  EXPECT_TRUE(contains(out["device"].get<std::string>(), "k40")) << out["device"];

  // A faster GPU gives a shorter ideal iteration.
  const MplanRun h = mplan({"bounds", example_model("vgg16"), "--device", "h100", "--json"});
  ASSERT_EQ(h.exit_code, 0) << h.describe();
  EXPECT_LT(nlohmann::json::parse(h.out)["ideal_time_ms"].get<double>(), out["ideal_time_ms"].get<double>());
}

TEST_F(Bounds, UnknownDeviceFailsListingTheDevices) {
  const MplanRun r = mplan({"bounds", example_model("vgg16"), "--device", "nosuch"});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
  EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "--device")) << r.err;
  EXPECT_TRUE(contains(r.err, "nosuch")) << r.err;
  for (const char* device : {"k40", "p100", "h100", "titanx"}) EXPECT_TRUE(contains(r.err, device)) << r.err;
}

TEST_F(Bounds, NonPositiveBatchFails) {
  for (const std::vector<std::string>& batch :
       {std::vector<std::string>{"--batch", "0"}, {"--batch=-3"}, {"--batch", "-3"}}) {
    std::vector<std::string> args{"bounds", example_model("vgg16")};
    args.insert(args.end(), batch.begin(), batch.end());
    const MplanRun r = mplan(args);
    const std::string what = batch.back();
    EXPECT_NE(r.exit_code, 0) << what << "\n" << r.describe();
    EXPECT_EQ(r.signal, 0) << r.describe();
    EXPECT_TRUE(r.out.empty()) << what << "\n" << r.describe();
    EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.err;
    EXPECT_TRUE(contains(r.err, "--batch")) << what << ": " << r.err;
  }
  // Not a number at all.
  const MplanRun r = mplan({"bounds", example_model("vgg16"), "--batch", "many"});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "--batch")) << r.err;
}

TEST_F(Bounds, UnknownFlagFailsNamingIt) {
  const MplanRun r = mplan({"bounds", example_model("vgg16"), "--frobnicate"});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
  EXPECT_TRUE(contains(r.err, "--frobnicate")) << r.err;
  EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.err;
}

TEST_F(Bounds, MissingModelArgumentOrFileFails) {
  MplanRun r = mplan({"bounds"});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "model")) << r.err;

  const std::string missing = path("no_such_folder/model.yaml");
  r = mplan({"bounds", missing});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
  EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, missing)) << r.err;
}

TEST_F(Bounds, BadModelFailsWithFileLineColumnAndNoOutput) {
  const std::string model_path = path("bad.yaml");
  write_file(model_path,
             "name: bad\n"
             "input: [3, 8, 8]\n"
             "batch: 2\n"
             "classes: 10\n"
             "layers:\n"
             "  - {name: c1, op: conv, out: 4, kernel: 3}\n"
             "  - {name: c2, op: convolution, out: 4, kernel: 3}\n"
             "  - {op: flatten}\n"
             "  - {op: linear, out: 10}\n"
             "  - {op: softmax_xent}\n");
  const MplanRun r = mplan({"bounds", model_path});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
  EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.err;
  // The unknown op is on line 7; the column is 1-based and on that line.
  const std::string prefix = model_path + ":7:";
  const size_t at = r.err.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.err;
  std::smatch column_match;
  const std::string after = r.err.substr(at + prefix.size());
  ASSERT_TRUE(std::regex_search(after, column_match, std::regex("^([0-9]+): "))) << r.err;
  const int column = std::stoi(column_match[1]);
  EXPECT_GE(column, 1);
  EXPECT_LE(column, 50);
  EXPECT_TRUE(contains(r.err, "convolution")) << r.err;

  // The same with --json and --device: still nothing on stdout.
  const MplanRun j = mplan({"bounds", model_path, "--json", "--device", "k40"});
  EXPECT_EQ(j.exit_code, 1) << j.describe();
  EXPECT_TRUE(j.out.empty()) << j.describe();

  // Not YAML at all, and an empty file.
  write_file(path("garbage.yaml"), "layers: [ {name: a\n");
  MplanRun g = mplan({"bounds", path("garbage.yaml")});
  EXPECT_NE(g.exit_code, 0) << g.describe();
  EXPECT_EQ(g.signal, 0) << g.describe();
  EXPECT_TRUE(g.out.empty()) << g.describe();
  EXPECT_TRUE(contains(g.err, path("garbage.yaml") + ":")) << g.err;
  write_file(path("empty.yaml"), "");
  g = mplan({"bounds", path("empty.yaml")});
  EXPECT_NE(g.exit_code, 0) << g.describe();
  EXPECT_EQ(g.signal, 0) << g.describe();
  EXPECT_TRUE(contains(g.err, path("empty.yaml"))) << g.err;
}

// ---- The top level: `mplan` alone, --version, --help, an unknown command.

class TopLevel : public MplanTest {};

TEST_F(TopLevel, NoSubcommandPrintsUsageAndFails) {
  const MplanRun r = mplan({});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  const std::string all = r.out + r.err;
  EXPECT_TRUE(contains(all, "Usage") || contains(all, "usage")) << r.describe();
  // The usage names the commands a user can run.
  for (const char* command : {"bounds", "profile", "compile"}) EXPECT_TRUE(contains(all, command)) << r.describe();
}

TEST_F(TopLevel, VersionPrintsTheProjectVersion) {
  const MplanRun r = mplan({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  std::smatch project;
  const std::string cmake = read_file(std::string(MPLAN_SOURCE_DIR) + "/CMakeLists.txt");
  ASSERT_TRUE(std::regex_search(cmake, project, std::regex(R"(project\(mplan VERSION ([0-9.]+))")));
  EXPECT_EQ(r.out, "mplan " + project[1].str() + "\n") << r.describe();
}

TEST_F(TopLevel, HelpListsTheCommandsAndSucceeds) {
  const MplanRun r = mplan({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (const char* command : {"bounds", "profile", "compile", "inspect"}) EXPECT_TRUE(contains(r.out, command)) << r.out;
  const MplanRun b = mplan({"bounds", "--help"});
  EXPECT_EQ(b.exit_code, 0) << b.describe();
  for (const char* flag : {"--batch", "--layers", "--json", "--device"}) EXPECT_TRUE(contains(b.out, flag)) << b.out;
}

TEST_F(TopLevel, UnknownCommandFailsNamingIt) {
  const MplanRun r = mplan({"bounce", example_model("vgg16")});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
  EXPECT_TRUE(contains(r.err, "mplan: error: unknown command 'bounce'")) << r.describe();
  // The message lists the commands there are.
  const std::string message = r.err.substr(r.err.find("mplan: error:"));
  for (const char* command : {"bounds", "profile", "compile"}) EXPECT_TRUE(contains(message, command)) << message;
}

}  // namespace
}  // namespace mplan::cli_test
