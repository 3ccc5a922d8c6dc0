// Every example model builds into a TDFG that passes check_tdfg, with the
// bounds in their natural order; and a model read from YAML gets the same
// edges as one built in code.

#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/parse.h"
#include "tdfg/bounds.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

TEST(Examples, EveryExampleModelPassesCheckTdfg) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(MPLAN_SOURCE_DIR) / "examples" / "models";
  if (!fs::exists(folder)) GTEST_SKIP() << "no examples/models yet";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) GTEST_SKIP() << "no example models yet";
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    Result<Model> model = load_model(file.string());
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    Tdfg tdfg = build_tdfg(*model);
    Status status = check_tdfg(tdfg);
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    // Every weighted layer has a BP2; only those do.
    for (LayerId l = 0; l < static_cast<LayerId>(model->layers.size()); ++l)
      EXPECT_EQ(tdfg.bp2_of[l] != kNoTask, model->parameter_count(l) > 0) << model->layers[l].name;
    MemoryBounds bounds = compute_bounds(tdfg, model->batch);
    EXPECT_LT(bounds.weight_bytes, bounds.modnn_min_bytes);
    EXPECT_LE(bounds.liveness_peak_bytes, bounds.naive_bytes);
    EXPECT_LE(compute_bounds(tdfg, 1).modnn_min_bytes, compute_bounds(tdfg, 1).liveness_peak_bytes);
  }
}

TEST(Examples, ParsedYamlGivesTheSameEdgesAsTheHandBuiltModel) {
  const char* yaml = R"(
name: tiny
input: [1, 4, 4]
batch: 2
classes: 3
optimizer: {kind: sgd, lr: 0.1, momentum: 0.0}
layers:
  - {name: conv0, op: conv, out: 2, kernel: 3, pad: 1}
  - {name: r, op: relu}
  - {name: t, op: add, in: [r, conv0]}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 3}
  - {name: loss, op: softmax_xent}
)";
  Result<Model> parsed = parse_model(yaml, "tiny.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  Model built = testing::make_model(
      Shape{{1, 4, 4}}, 3,
      {testing::conv("conv0", 2, 3, 1), testing::plain("r", Op::relu),
       testing::plain("t", Op::add, {"r", "conv0"}), testing::plain("flat", Op::flatten),
       testing::linear("fc", 3), testing::plain("loss", Op::softmax_xent)});
  Tdfg from_yaml = build_tdfg(*parsed);
  Tdfg from_code = build_tdfg(built);
  ASSERT_EQ(from_yaml.tasks.size(), from_code.tasks.size());
  for (size_t t = 0; t < from_yaml.tasks.size(); ++t) {
    EXPECT_EQ(from_yaml.tasks[t].name, from_code.tasks[t].name);
    EXPECT_EQ(from_yaml.tasks[t].reads, from_code.tasks[t].reads) << from_yaml.tasks[t].name;
    EXPECT_EQ(from_yaml.tasks[t].writes, from_code.tasks[t].writes) << from_yaml.tasks[t].name;
  }
  EXPECT_EQ(compute_bounds(from_yaml, 2).liveness_peak_bytes,
            compute_bounds(from_code, 2).liveness_peak_bytes);
}

}  // namespace
}  // namespace mplan
