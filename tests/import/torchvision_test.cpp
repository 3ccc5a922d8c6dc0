// Every torchvision classification family the vision ops cover, through both
// ways in: exported by PyTorch to ONNX and imported by `mplan import`, and
// exported by tools/mplan_export.py. Each must have exactly the parameters of
// torchvision's module and plan, with the verifier's approval, at three
// budgets: unlimited, one that splits the batch, and one that offloads at
// the whole batch (tests/e2e/e2e_util.h's). The models come from
// tests/import/torchvision_models.py, run once per build folder (and again
// when the script changes); /usr/bin/python3 needs torch, torchvision and onnx.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/sub_batch.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

namespace fs = std::filesystem;

bool have_python_tools() {
  static const bool ok =
      std::system("/usr/bin/python3 -c 'import torch, torchvision, onnx, numpy' > /dev/null 2>&1") == 0;
  return ok;
}

// The exported models, made once: a lock file keeps concurrent tests (ctest
// -j) from exporting twice; a stamp holds the script's size and time.
std::string models_dir() {
  static const std::string dir = [] {
    const fs::path d = fs::path(MPLAN_BINARY_DIR) / "import-models";
    fs::create_directories(d);
    const fs::path script = fs::path(MPLAN_SOURCE_DIR) / "tests/import/torchvision_models.py";
    const fs::path exporter = fs::path(MPLAN_SOURCE_DIR) / "tools/mplan_export.py";
    const std::string stamp_text =
        std::to_string(fs::file_size(script)) + " " +
        std::to_string(fs::last_write_time(script).time_since_epoch().count()) + " " +
        std::to_string(fs::file_size(exporter)) + " " +
        std::to_string(fs::last_write_time(exporter).time_since_epoch().count());
    const int lock = ::open((d / ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    ::flock(lock, LOCK_EX);
    std::ifstream stamp_in(d / "stamp");
    std::string old((std::istreambuf_iterator<char>(stamp_in)), std::istreambuf_iterator<char>());
    if (old != stamp_text) {
      fs::remove(d / "stamp");
      const std::string command = "timeout 900 /usr/bin/python3 " + script.string() + " " + d.string() + " > " +
                                  (d / "export.log").string() + " 2>&1";
      if (std::system(command.c_str()) == 0) std::ofstream(d / "stamp") << stamp_text;
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
    return d.string();
  }();
  return dir;
}

enum class Budget { unlimited, sub_batch, offload };

// Plans at a budget, checks the plan with the independent verifier, and
// that the budget did what it is for (split the batch, offload).
void plan_and_verify(const Model& model, Budget budget, const std::string& what) {
  const Device device = load_device("k40").value();
  const AnalyticCostModel cost(device);
  const Tdfg tdfg = build_tdfg(model);
  PlanOptions options;
  const int64_t resident = resident_region_bytes(tdfg);
  switch (budget) {
    case Budget::unlimited: options.budget_bytes = int64_t{64} << 30; break;
    case Budget::sub_batch:
      options.budget_bytes =
          resident + 2 * max_task_arena_bytes(tdfg, cost, std::max<int64_t>(1, model.batch / 4), false) + 4096;
      break;
    case Budget::offload:
      options.sub_batch = model.batch;
      options.budget_bytes = resident + max_task_arena_bytes(tdfg, cost, model.batch, false) + 4096;
      break;
  }
  Result<Plan> plan = plan_iteration(tdfg, cost, options).take_plan();
  ASSERT_TRUE(plan.ok()) << what << ": " << plan.error().to_string();
  const std::vector<Violation> violations = verify_plan(*plan, tdfg);
  EXPECT_TRUE(violations.empty()) << what << ": " << (violations.empty() ? "" : to_string(violations[0]));
  if (budget == Budget::sub_batch) {
    EXPECT_GT(plan->sub_batches.size(), 1u) << what << ": the batch must be split";
  }
  const int64_t offloads = plan->summary.offload_count;
  if (budget == Budget::offload) {
    EXPECT_GT(offloads, 0) << what << ": blocks must be offloaded";
  }
  std::printf("  %-34s budget %9.1f MiB: %zu sub-batch(es), %lld offloads, %.1f ms simulated\n", what.c_str(),
              static_cast<double>(options.budget_bytes) / (1 << 20), plan->sub_batches.size(),
              static_cast<long long>(offloads), plan->summary.simulated_ms);
}

class Torchvision : public ::testing::TestWithParam<std::string> {};

TEST_P(Torchvision, ImportsExportsWithTorchvisionsParametersAndPlansAtThreeBudgets) {
  if (!have_python_tools()) GTEST_SKIP() << "/usr/bin/python3 lacks torch, torchvision or onnx";
  const std::string name = GetParam();
  const fs::path dir = models_dir();
  ASSERT_TRUE(fs::exists(dir / "stamp")) << "the export failed; see " << (dir / "export.log");
  nlohmann::json counts = nlohmann::json::parse(std::ifstream(dir / "counts.json"));
  ASSERT_TRUE(counts.contains(name));
  const int64_t expected = counts[name]["parameters"].get<int64_t>();

  onnx_import::ImportOptions options;
  options.batch = 8;
  Result<onnx_import::ImportResult> imported = onnx_import::import_onnx((dir / (name + ".onnx")).string(), options);
  ASSERT_TRUE(imported.ok()) << imported.error().to_string();
  Result<Model> from_onnx = parse_model(imported->yaml, name + ".onnx");
  ASSERT_TRUE(from_onnx.ok()) << from_onnx.error().to_string();
  Result<Model> from_export = load_model((dir / (name + ".yaml")).string());
  ASSERT_TRUE(from_export.ok()) << from_export.error().to_string();
  std::printf("%s: torchvision %lld parameters (published %s), ONNX import %lld (%zu layers), exporter %lld (%zu "
              "layers)\n",
              name.c_str(), static_cast<long long>(expected), counts[name]["published"].dump().c_str(),
              static_cast<long long>(from_onnx->parameter_count()), from_onnx->layers.size(),
              static_cast<long long>(from_export->parameter_count()), from_export->layers.size());
  EXPECT_EQ(from_onnx->parameter_count(), expected);
  EXPECT_EQ(from_export->parameter_count(), expected);
  EXPECT_EQ(imported->onnx_parameters, expected);
  for (Budget budget : {Budget::unlimited, Budget::sub_batch, Budget::offload}) {
    plan_and_verify(*from_onnx, budget, name + " (ONNX)");
    plan_and_verify(*from_export, budget, name + " (exporter)");
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Torchvision,
                         ::testing::Values("alexnet", "vgg16", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
                                           "densenet121", "googlenet", "inception_v3", "mobilenet_v2",
                                           "mobilenet_v3_large", "efficientnet_b0", "regnet_y_400mf",
                                           "shufflenet_v2_x1_0", "convnext_tiny", "vit_b_16"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mplan
