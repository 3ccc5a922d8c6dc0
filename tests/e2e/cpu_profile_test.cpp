// The measured CPU cost model (profiler/cpu_measured.h): real timings of the
// CPU runtime's algorithms, cached by task signature, good enough for the
// planner and codegen to run the whole pipeline without a GPU.

#include <gtest/gtest.h>

#include <set>

#include "codegen/codegen.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "profiler/cpu_measured.h"
#include "profiler/profile.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

TEST(CpuProfile, MeasuresEveryConvAlgorithmAndCachesBySignature) {
  Result<Model> model = load_model(source_dir() + "/examples/models/every_op.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  CpuMeasureOptions options;
  options.repeats = 1;
  const CpuMeasuredCostModel cost(options);
  const LayerId conv1 = model->find("conv1");  // 3x3 stride 1: every algorithm has a forward
  std::vector<TaskOption> fp = cost.options(tdfg, tdfg.fp_of[conv1], 4);
  std::set<std::string> names;
  for (const TaskOption& o : fp) {
    names.insert(o.algorithm);
    EXPECT_GT(o.time_ms, 0) << o.algorithm;
    EXPECT_EQ(o.workspace_bytes == 0, o.algorithm == "direct") << o.algorithm;
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"direct", "gemm", "winograd", "tiled_gemm", "tiled_gemm_small"}));
  for (size_t i = 1; i < fp.size(); ++i) EXPECT_LE(fp[i - 1].time_ms, fp[i].time_ms);  // fastest first
  // Backward-filter has no Winograd.
  for (const TaskOption& o : cost.options(tdfg, tdfg.bp2_of[conv1], 4)) EXPECT_NE(o.algorithm, "winograd");
  // Asking again measures nothing new.
  const int made = cost.measurements();
  cost.options(tdfg, tdfg.fp_of[conv1], 4);
  EXPECT_EQ(cost.measurements(), made);
  EXPECT_GT(cost.host_to_device_ms(1 << 20), cost.host_to_device_ms(1 << 10));
}

TEST(CpuProfile, WholePipelineRunsMeasured) {
  Result<Model> model = load_model(source_dir() + "/examples/models/cifar_small.yaml");
  ASSERT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  CpuMeasureOptions options;
  options.repeats = 1;
  const CpuMeasuredCostModel cost(options);
  // The profile.json of `mplan profile --backend cpu`, served back by the recorded model.
  const Profile profile = make_profile(tdfg, cost, {8, 32}, "cpu");
  Result<Profile> parsed = parse_profile(profile_to_json(profile), "profile.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  auto recorded = RecordedCostModel::create(*parsed, tdfg, {}, "profile.json");
  ASSERT_TRUE(recorded.ok()) << recorded.error().to_string();
  PlanOptions plan_options;
  plan_options.budget_bytes = int64_t{64} << 20;
  Result<Plan> plan = plan_iteration(tdfg, **recorded, plan_options).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  Result<codegen::GeneratedProgram> program = codegen::emit_program(*model, tdfg, *plan, {});
  ASSERT_TRUE(program.ok()) << program.error().to_string();
  EXPECT_NE(program->find("train.cpp")->text.find("conv_forward(p.compute(), "), std::string::npos);
  // Planned with the CPU's own measurements: the program runs exactly what was planned.
  EXPECT_TRUE(program->warnings.empty()) << program->warnings.front();
}

}  // namespace
}  // namespace mplan::e2e
