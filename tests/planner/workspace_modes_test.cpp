// The planner's workspace modes (planner/workspace_mode.h, mu-cuDNN §III):
// every mode gives a plan the independent verifier accepts, whose
// micro-batches add up to each round's sub-batch; wr respects its per-kernel
// limit and takes the WR optimum, wd keeps every workspace inside its pool
// (and the pool free of blocks) and divides it by the ILP; wd:auto is at
// least as fast as the pools it tries; auto micro-batches a convolution only
// where a fast workspace does not fit; bad specs and pools give clear errors.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/wr_optimizer.h"
#include "planner/planner.h"
#include "planner/sub_batch.h"
#include "planner/verify.h"
#include "planner/workspace_mode.h"
#include "planner_test_util.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"

namespace mplan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Loaded {
  std::unique_ptr<Model> model;
  Tdfg tdfg;
};

Loaded load(const std::string& stem) {
  Loaded l;
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml");
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  l.model = std::make_unique<Model>(std::move(model).value());
  l.tdfg = build_tdfg(*l.model);
  return l;
}

AnalyticCostModel k40() {
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  return AnalyticCostModel(device.value());
}

std::string violations_text(const std::vector<Violation>& violations) {
  std::string out;
  for (size_t i = 0; i < violations.size() && i < 10; ++i) out += to_string(violations[i]) + "\n";
  return out;
}

// What every mode promises: a verified plan; micro-batches that add up to the
// round's sub-batch, with the choice's time the sum and workspace the max.
void expect_valid(const Tdfg& tdfg, const Plan& plan) {
  std::vector<Violation> violations = verify_plan(plan, tdfg);
  EXPECT_TRUE(violations.empty()) << violations_text(violations);
  testing::expect_consistent(tdfg, plan);
  EXPECT_LE(plan.summary.peak_live_bytes, plan.summary.peak_arena_bytes);
  for (const TaskChoice& c : plan.choices) {
    if (c.micro_batches.empty()) continue;
    EXPECT_TRUE(tdfg.tasks[c.task].has_algorithms);
    int64_t samples = 0, workspace = 0;
    double ms = 0;
    for (const MicroBatch& m : c.micro_batches) {
      samples += m.size;
      workspace = std::max(workspace, m.workspace_bytes);
      ms += m.time_ms;
    }
    EXPECT_EQ(samples, c.sub_batch) << tdfg.tasks[c.task].name;
    EXPECT_EQ(workspace, c.workspace_bytes);
    EXPECT_NEAR(ms, c.time_ms, 1e-9 * std::max(1.0, ms));
  }
}

Result<Plan> plan_with(const Tdfg& tdfg, const CostModel& cost, int64_t budget, const std::string& mode,
                       WorkspaceReport* report = nullptr) {
  Result<WorkspaceMode> m = parse_workspace_mode(mode);
  EXPECT_TRUE(m.ok()) << mode;
  PlanOptions o;
  o.budget_bytes = budget;
  o.workspace = m->use;
  o.workspace_bytes = m->bytes;
  PlanResult planned = plan_iteration(tdfg, cost, o);
  if (report != nullptr) *report = planned.workspace_report;
  return std::move(planned).take_plan();
}

TEST(WorkspaceModes, ParsesEverySpelling) {
  EXPECT_EQ(parse_workspace_mode("auto")->use, WorkspaceUse::automatic);
  EXPECT_EQ(workspace_mode_name(*parse_workspace_mode("auto")), "auto");
  EXPECT_EQ(WorkspaceMode{}.use, WorkspaceUse::automatic);
  EXPECT_EQ(PlanOptions{}.workspace, WorkspaceUse::automatic);
  EXPECT_EQ(parse_workspace_mode("undivided")->use, WorkspaceUse::undivided);
  EXPECT_EQ(parse_workspace_mode("dynamic")->use, WorkspaceUse::dynamic);
  EXPECT_EQ(parse_workspace_mode("wd:auto")->use, WorkspaceUse::wd_auto);
  Result<WorkspaceMode> wr = parse_workspace_mode("wr:64MiB");
  ASSERT_TRUE(wr.ok());
  EXPECT_EQ(wr->use, WorkspaceUse::wr);
  EXPECT_EQ(wr->bytes, 64 * kMiB);
  Result<WorkspaceMode> wd = parse_workspace_mode("wd:1.5GiB");
  ASSERT_TRUE(wd.ok());
  EXPECT_EQ(wd->use, WorkspaceUse::wd);
  EXPECT_EQ(wd->bytes, 1536 * kMiB);
  EXPECT_EQ(parse_workspace_mode("wd:0")->bytes, 0);
  EXPECT_EQ(workspace_mode_name(*wr), "wr:" + format_bytes(64 * kMiB));
}

TEST(WorkspaceModes, ParseErrorsSayWhatWasExpected) {
  Result<WorkspaceMode> bad_size = parse_workspace_mode("wd:abc");
  ASSERT_FALSE(bad_size.ok());
  EXPECT_EQ(bad_size.error().message, "--workspace 'wd:abc': expected a size like 512MiB");
  ASSERT_FALSE(parse_workspace_mode("wr:").ok());
  EXPECT_NE(parse_workspace_mode("wr:-8MiB").error().message.find("expected a size like 512MiB"),
            std::string::npos);
  Result<WorkspaceMode> unknown = parse_workspace_mode("pooled");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("--workspace 'pooled'"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("wd:auto"), std::string::npos);
  EXPECT_FALSE(parse_workspace_mode("WD:1GiB").ok());
  EXPECT_FALSE(parse_workspace_mode("wd:auto:1").ok());
}

// cifar_small on the K40: a tight budget (offloads) and a roomy one.
class ModesOnCifar : public ::testing::TestWithParam<std::string> {};

TEST_P(ModesOnCifar, GivesVerifiedPlans) {
  Loaded l = load("cifar_small");
  AnalyticCostModel cost = k40();
  const int64_t minimum = minimum_budget(l.tdfg, cost).bytes;
  for (int64_t budget : {minimum * 3 / 2, minimum * 4, minimum * 40}) {
    SCOPED_TRACE(GetParam() + " at " + std::to_string(budget) + " bytes");
    Result<Plan> plan = plan_with(l.tdfg, cost, budget, GetParam());
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    expect_valid(l.tdfg, *plan);
  }
}

INSTANTIATE_TEST_SUITE_P(Every, ModesOnCifar,
                         ::testing::Values("auto", "undivided", "dynamic", "wr:0", "wr:256KiB", "wr:8MiB", "wr:1GiB",
                                           "wd:0", "wd:128KiB", "wd:512KiB", "wd:auto"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(WorkspaceModes, WrTakesTheWrOptimumUnderItsLimit) {
  Loaded l = load("cifar_small");
  AnalyticCostModel cost = k40();
  const int64_t budget = minimum_budget(l.tdfg, cost).bytes * 40;
  for (int64_t limit : {int64_t{0}, 256 * int64_t{1024}, 4 * kMiB}) {
    Result<Plan> plan = plan_with(l.tdfg, cost, budget, "wr:" + std::to_string(limit));
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    int conv_choices = 0;
    for (const TaskChoice& c : plan->choices) {
      if (c.round == kOnceRound || !l.tdfg.tasks[c.task].has_algorithms) continue;
      ++conv_choices;
      EXPECT_LE(c.workspace_bytes, limit);
      for (const MicroBatch& m : c.micro_batches) EXPECT_LE(m.workspace_bytes, limit);
      microbatch::BenchmarkTable table = microbatch::table_from_cost_model(
          cost, l.tdfg, c.task,
          microbatch::micro_batch_sizes(microbatch::BatchSizePolicy::power_of_two, c.sub_batch));
      Result<microbatch::Configuration> wr =
          microbatch::optimize_wr(table, c.sub_batch, limit, microbatch::BatchSizePolicy::power_of_two);
      ASSERT_TRUE(wr.ok());
      EXPECT_DOUBLE_EQ(c.time_ms, wr->time_ms()) << l.tdfg.tasks[c.task].name;
      EXPECT_EQ(c.workspace_bytes, wr->workspace_bytes());
    }
    EXPECT_GT(conv_choices, 0);
  }
}

// wd: every workspace lies at the pool's start, inside the pool; no block
// buffer ever enters the pool; each kernel takes its WR optimum with the pool
// as its limit (one compute stream: kernels use the pool one at a time,
// planner/workspace_mode.h), so no kernel is slower than under mu-cuDNN's
// division of the pool (Eq. 4: the kernels' workspaces summing to the pool).
void expect_inside_pool(const Tdfg& tdfg, const Plan& plan, int64_t pool, const CostModel* cost = nullptr) {
  const int64_t pool_offset = plan.arena_bytes - align_up(pool);
  for (const TaskChoice& c : plan.choices) {
    if (c.round == kOnceRound || !tdfg.tasks[c.task].has_algorithms) continue;
    if (cost != nullptr) {
      microbatch::BenchmarkTable table = microbatch::table_from_cost_model(
          *cost, tdfg, c.task, microbatch::micro_batch_sizes(microbatch::BatchSizePolicy::power_of_two, c.sub_batch));
      Result<microbatch::Configuration> wr =
          microbatch::optimize_wr(table, c.sub_batch, pool, microbatch::BatchSizePolicy::power_of_two);
      ASSERT_TRUE(wr.ok());
      EXPECT_DOUBLE_EQ(c.time_ms, wr->time_ms()) << tdfg.tasks[c.task].name;
    }
    if (c.workspace_bytes == 0) continue;
    EXPECT_EQ(c.workspace_offset, pool_offset);
    EXPECT_LE(align_up(c.workspace_bytes), align_up(pool));
  }
  int64_t largest_workspace = 0;
  for (const Buffer& b : plan.buffers) {
    if (b.workspace_of != kNoTask) largest_workspace = std::max(largest_workspace, align_up(b.bytes));
    if (b.resident || b.workspace_of != kNoTask) continue;
    EXPECT_LE(b.offset + align_up(std::max<int64_t>(1, b.bytes)), pool_offset)
        << "block buffer " << b.id << " enters the pool";
  }
  // Most bytes live at once counts the workspace in use, not the whole reserved pool.
  EXPECT_LE(plan.summary.peak_live_bytes, pool_offset + largest_workspace);
  EXPECT_LE(plan.summary.peak_live_bytes, plan.summary.peak_arena_bytes);
}

TEST(WorkspaceModes, TightLimitsSplitKernelsIntoMicroBatches) {
  // The fake's fastest algorithm needs 4x its input as workspace: under a
  // 1 MiB limit conv1 at 32 samples (1.5 MiB) runs it as micro-batches.
  Loaded l = load("cifar_small");
  testing::FakeCost cost;
  const int64_t budget = minimum_budget(l.tdfg, cost).bytes * 40;
  for (const std::string mode : {"wr:1MiB", "wd:3MiB"}) {
    SCOPED_TRACE(mode);
    Result<Plan> plan = plan_with(l.tdfg, cost, budget, mode);
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    expect_valid(l.tdfg, *plan);
    int split = 0;
    for (const TaskChoice& c : plan->choices) split += c.micro_batches.size() >= 2 ? 1 : 0;
    EXPECT_GT(split, 0);
    if (mode == "wd:3MiB") expect_inside_pool(l.tdfg, *plan, 3 * kMiB);
  }
}

TEST(WorkspaceModes, WdKeepsWorkspacesInsideItsPool) {
  Loaded l = load("cifar_small");
  AnalyticCostModel cost = k40();
  const int64_t minimum = minimum_budget(l.tdfg, cost).bytes;
  int pooled_workspaces = 0;
  for (int64_t budget : {minimum * 4, minimum * 40}) {
    for (int64_t pool : {kMiB / 4, kMiB, 4 * kMiB, 64 * kMiB}) {
      SCOPED_TRACE(std::to_string(pool) + " bytes of pool, budget " + std::to_string(budget));
      WorkspaceReport report;
      Result<Plan> plan = plan_with(l.tdfg, cost, budget, "wd:" + std::to_string(pool), &report);
      if (!plan.ok()) {
        // Only a pool that leaves too little arena may fail.
        const std::string& m = plan.error().message;
        EXPECT_TRUE(m.find("the pool leaves") != std::string::npos ||
                    m.find("the pool does not fit") != std::string::npos)
            << m;
        continue;
      }
      expect_valid(l.tdfg, *plan);
      expect_inside_pool(l.tdfg, *plan, pool, &cost);
      EXPECT_EQ(report.pool_bytes, pool);
      EXPECT_EQ(report.wd_problem.kernels.size(), microbatch::convolution_kernels(l.tdfg).size() *
                                                       distinct_sub_batches(plan->sub_batches).size());
      for (const TaskChoice& c : plan->choices) pooled_workspaces += c.workspace_bytes > 0 ? 1 : 0;
    }
  }
  EXPECT_GT(pooled_workspaces, 0);
}

TEST(WorkspaceModes, WdAutoIsAtLeastAsFastAsThePoolsItTries) {
  Loaded l = load("cifar_small");
  AnalyticCostModel cost = k40();
  const int64_t budget = minimum_budget(l.tdfg, cost).bytes * 4;
  WorkspaceReport report;
  Result<Plan> best = plan_with(l.tdfg, cost, budget, "wd:auto", &report);
  ASSERT_TRUE(best.ok()) << best.error().to_string();
  expect_valid(l.tdfg, *best);
  expect_inside_pool(l.tdfg, *best, report.pool_bytes);
  for (const std::string mode : {"wd:0", "wd:64MiB"}) {
    Result<Plan> other = plan_with(l.tdfg, cost, budget, mode);
    if (!other.ok()) continue;
    EXPECT_LE(best->summary.simulated_ms, other->summary.simulated_ms + 1e-9) << mode;
  }
}

TEST(WorkspaceModes, PoolsThatCannotWorkGiveClearErrors) {
  // A fake cost model whose conv tasks all need workspace: 1 MiB at least.
  Loaded l = load("cifar_small");
  testing::FakeCost cost;
  for (TaskId t : microbatch::convolution_kernels(l.tdfg)) {
    cost.table[l.tdfg.tasks[t].name] = {TaskOption{"fast", 1.0, 4 * kMiB}, TaskOption{"lean", 2.0, kMiB}};
  }
  const int64_t budget = minimum_budget(l.tdfg, cost).bytes * 40;
  Result<Plan> small = plan_with(l.tdfg, cost, budget, "wd:64KiB");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("--workspace 'wd:"), std::string::npos) << small.error().message;
  EXPECT_NE(small.error().message.find("fits a workspace limit"), std::string::npos) << small.error().message;

  Result<Plan> huge = plan_with(l.tdfg, cost, budget, "wd:1TiB");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("the pool does not fit the arena"), std::string::npos)
      << huge.error().message;
  const int64_t arena = plan_with(l.tdfg, cost, budget, "undivided")->arena_bytes;
  Result<Plan> crowding = plan_with(l.tdfg, cost, budget, "wd:" + std::to_string(arena - kPlanAlignmentBytes));
  ASSERT_FALSE(crowding.ok());
  EXPECT_NE(crowding.error().message.find("the pool leaves 256 bytes"), std::string::npos)
      << crowding.error().message;

  Result<Plan> wr = plan_with(l.tdfg, cost, budget, "wr:64KiB");
  ASSERT_FALSE(wr.ok());
  EXPECT_NE(wr.error().message.find("--workspace 'wr:"), std::string::npos) << wr.error().message;

  // A pool that holds every kernel's leanest workspace works.
  const int64_t kernels = static_cast<int64_t>(microbatch::convolution_kernels(l.tdfg).size());
  Result<Plan> enough = plan_with(l.tdfg, cost, budget, "wd:" + std::to_string(kernels * kMiB));
  ASSERT_TRUE(enough.ok()) << enough.error().to_string();
  expect_valid(l.tdfg, *enough);
  expect_inside_pool(l.tdfg, *enough, kernels * kMiB);
}

// The auto mode (the default), table-built: on the fake cost model a
// convolution's fastest algorithm needs four times its input in workspace,
// and run as two micro-batches it is barely slower. In an arena one byte
// short of the largest task's fastest option at the whole batch, one round,
// the micro-batched plan beats every undivided one, and auto finds it; where
// every workspace fits, auto searches nothing more than undivided does.
PlanOptions one_round(int64_t budget, WorkspaceUse use) {
  PlanOptions o;
  o.budget_bytes = budget;
  o.workspace = use;
  o.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  return o;
}

TEST(WorkspaceModes, AutoMicroBatchesAConvolutionWhoseFastWorkspaceDoesNotFit) {
  Loaded l = load("cifar_small");
  testing::FakeCost cost;
  const int64_t batch = l.model->batch;
  const int64_t budget = resident_region_bytes(l.tdfg) + max_task_arena_bytes(l.tdfg, cost, batch, true) - 1;
  const PlanResult undivided = plan_iteration(l.tdfg, cost, one_round(budget, WorkspaceUse::undivided));
  const PlanResult automatic = plan_iteration(l.tdfg, cost, one_round(budget, WorkspaceUse::automatic));
  ASSERT_TRUE(undivided.feasible) << undivided.note;
  ASSERT_TRUE(automatic.feasible) << automatic.note;
  expect_valid(l.tdfg, automatic.plan);
  EXPECT_EQ(automatic.plan.sub_batches, std::vector<int64_t>{batch});
  EXPECT_LT(automatic.plan.summary.simulated_ms, undivided.plan.summary.simulated_ms);
  EXPECT_TRUE(std::any_of(automatic.plan.choices.begin(), automatic.plan.choices.end(),
                          [](const TaskChoice& c) { return !c.micro_batches.empty(); }));
  EXPECT_NE(automatic.note.find("micro-batched convolutions"), std::string::npos)
      << automatic.note;
  std::printf("cifar_small, fake costs, one round in %lld bytes: undivided %.3f ms, auto %.3f ms\n",
              static_cast<long long>(budget), undivided.plan.summary.simulated_ms,
              automatic.plan.summary.simulated_ms);
}

TEST(WorkspaceModes, AutoIsUndividedWhereEveryWorkspaceFits) {
  Loaded l = load("cifar_small");
  testing::FakeCost cost;
  const int64_t batch = l.model->batch;
  const int64_t budget = resident_region_bytes(l.tdfg) + 4 * max_task_arena_bytes(l.tdfg, cost, batch, true);
  const PlanResult undivided = plan_iteration(l.tdfg, cost, one_round(budget, WorkspaceUse::undivided));
  const PlanResult automatic = plan_iteration(l.tdfg, cost, one_round(budget, WorkspaceUse::automatic));
  ASSERT_TRUE(undivided.feasible) << undivided.note;
  ASSERT_TRUE(automatic.feasible) << automatic.note;
  EXPECT_EQ(automatic.simulations, undivided.simulations);
  EXPECT_EQ(automatic.plan.summary.simulated_ms, undivided.plan.summary.simulated_ms);
  EXPECT_TRUE(std::none_of(automatic.plan.choices.begin(), automatic.plan.choices.end(),
                           [](const TaskChoice& c) { return !c.micro_batches.empty(); }));
}

TEST(WorkspaceModes, DumpedLpNamesTheKernels) {
  Loaded l = load("cifar_small");
  AnalyticCostModel cost = k40();
  WorkspaceReport report;
  Result<Plan> plan = plan_with(l.tdfg, cost, minimum_budget(l.tdfg, cost).bytes * 40, "wd:4MiB", &report);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  const std::string path = ::testing::TempDir() + "/workspace_modes_test.lp";
  ASSERT_TRUE(microbatch::dump_wd_lp(report.wd_problem.kernels, report.pool_bytes, path).ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("conv2.fwd"), std::string::npos);
  EXPECT_NE(text.find("workspace"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mplan
