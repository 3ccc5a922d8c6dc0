// Recomputing convolutions (Checkmate §4, MONeT §3: any layer may be
// recomputed, not only the cheap ones of SuperNeurons §3.4). On a GPU that
// outruns its PCIe link, a convolution's output is cheaper to compute again
// than to copy to the host and back. The scenario: ResNet-50, batch 128, on
// the recorded H200 profile, one round (the full-batch statistics plain
// training computes), at half the memory of its unlimited plan. Without
// recomputed convolutions that plan costs about +56% over the unlimited one
// (docs/benchmarks-tight.md); with them, about +6%.
//
// A recomputed convolution reruns its first run's algorithm with a workspace
// of its own, so it computes the same values; the verifier checks the
// workspace against the first run's choice.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::has_kind;

struct TightResnet50 {
  std::unique_ptr<Model> model;
  Tdfg tdfg;
  std::unique_ptr<RecordedCostModel> cost;
  double unlimited_ms = 0;
  int64_t memory_bytes = 0;  // M: the unlimited plan's resident region plus its arena peak
  Plan plan;                 // at M / 2, one round
};

PlanResult plan_at(const TightResnet50& r, int64_t budget, WorkspaceUse workspace,
                   bool recompute_convolutions = true, bool early_drops = true) {
  PlanOptions o;
  o.recompute_convolutions = recompute_convolutions;
  o.early_drops = early_drops;
  o.budget_bytes = budget;
  o.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  o.workspace = workspace;
  if (workspace == WorkspaceUse::wd) o.workspace_bytes = 256 << 20;
  PlanResult result = plan_iteration(r.tdfg, *r.cost, o);
  for (const Task& task : r.tdfg.tasks) result.plan.task_names.push_back(task.name);
  for (const Block& b : r.tdfg.blocks) result.plan.block_names.push_back(b.name);
  return result;
}

const TightResnet50& tight_resnet50() {
  static const TightResnet50 r = [] {
    TightResnet50 t;
    Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/resnet50.yaml");
    EXPECT_TRUE(model.ok());
    if (!model.ok()) return t;
    t.model = std::make_unique<Model>(std::move(model).value());
    t.tdfg = build_tdfg(*t.model);
    Result<Profile> profile = load_profile(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/resnet50-h200.json");
    EXPECT_TRUE(profile.ok());
    if (!profile.ok()) return t;
    Result<std::unique_ptr<RecordedCostModel>> cost = RecordedCostModel::create(*profile, t.tdfg, {}, "resnet50");
    EXPECT_TRUE(cost.ok());
    if (!cost.ok()) return t;
    PlanOptions unlimited;
    unlimited.budget_bytes = (*cost)->device_memory_bytes();
    t.cost = std::move(cost).value();
    const PlanResult u = plan_iteration(t.tdfg, *t.cost, unlimited);
    EXPECT_TRUE(u.feasible) << u.note;
    t.unlimited_ms = u.plan.summary.simulated_ms;
    t.memory_bytes = u.plan.resident_region_bytes + u.plan.summary.peak_arena_bytes;
    PlanResult half = plan_at(t, t.memory_bytes / 2, WorkspaceUse::undivided);
    EXPECT_TRUE(half.feasible) << half.note;
    t.plan = std::move(half.plan);
    return t;
  }();
  return r;
}

bool recomputes_a_convolution(const Plan& plan, const Tdfg& tdfg) {
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::compute && s.recompute && tdfg.tasks[static_cast<size_t>(s.task)].has_algorithms)
      return true;
  return false;
}

// The recomputed convolution with a workspace (its first run's choice needs one).
int recomputed_conv_with_workspace(const Plan& plan, const Tdfg& tdfg) {
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::compute && s.recompute && tdfg.tasks[static_cast<size_t>(s.task)].has_algorithms &&
        s.workspace >= 0)
      return s.index;
  return -1;
}

TEST(ConvRecompute, ResNet50AtHalfItsMemoryInOneRoundRecomputesConvolutions) {
  const TightResnet50& r = tight_resnet50();
  ASSERT_GT(r.unlimited_ms, 0);
  EXPECT_EQ(r.plan.sub_batches.size(), 1u);
  EXPECT_TRUE(recomputes_a_convolution(r.plan, r.tdfg));
  const auto v = verify_plan(r.plan, r.tdfg);
  EXPECT_TRUE(v.empty()) << describe(v);
  const double overhead = r.plan.summary.simulated_ms / r.unlimited_ms - 1;
  std::printf("resnet50 one round at M/2: %+.1f%% over unlimited\n", 100 * overhead);
  // Offloading and cheap-layer recomputation alone give about +27% here (below).
  EXPECT_LT(overhead, 0.15);
}

// The same plan with the cheap layers alone recomputed (--no-recompute-convolutions)
// is much slower: the convolutions' outputs go over PCIe (+27% against +7%).
TEST(ConvRecompute, WithoutRecomputedConvolutionsThePlanIsSlower) {
  const TightResnet50& r = tight_resnet50();
  ASSERT_TRUE(r.cost);
  const PlanResult cheap_only = plan_at(r, r.memory_bytes / 2, WorkspaceUse::undivided, false);
  ASSERT_TRUE(cheap_only.feasible) << cheap_only.note;
  EXPECT_FALSE(recomputes_a_convolution(cheap_only.plan, r.tdfg));
  const double overhead = cheap_only.plan.summary.simulated_ms / r.unlimited_ms - 1;
  std::printf("resnet50 one round at M/2, cheap layers recomputed only: %+.1f%%\n", 100 * overhead);
  EXPECT_GT(cheap_only.plan.summary.simulated_ms, 1.15 * r.plan.summary.simulated_ms);
}

// `stem` planned in one round on the K40's analytic model at `percent` of
// its unlimited plan's memory (resident region plus arena peak).
struct K40OneRound {
  std::unique_ptr<Model> model;
  Tdfg tdfg;
  std::unique_ptr<AnalyticCostModel> cost;
  PlanResult planned;
};

std::unique_ptr<K40OneRound> k40_one_round(const std::string& stem, int64_t percent, bool refine_blocks = true) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml");
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(model.ok() && device.ok());
  if (!model.ok() || !device.ok()) return nullptr;
  auto out = std::make_unique<K40OneRound>();
  out->model = std::make_unique<Model>(std::move(model).value());
  out->tdfg = build_tdfg(*out->model);
  out->cost = std::make_unique<AnalyticCostModel>(*device);
  PlanOptions o;
  o.budget_bytes = out->cost->device_memory_bytes();
  const PlanResult unlimited = plan_iteration(out->tdfg, *out->cost, o);
  EXPECT_TRUE(unlimited.feasible) << unlimited.note;
  if (!unlimited.feasible) return nullptr;
  o.budget_bytes = (unlimited.plan.resident_region_bytes + unlimited.plan.summary.peak_arena_bytes) * percent / 100;
  o.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  o.refine_blocks = refine_blocks;
  out->planned = plan_iteration(out->tdfg, *out->cost, o);
  EXPECT_TRUE(out->planned.feasible) << out->planned.note;
  if (!out->planned.feasible) return nullptr;
  return out;
}

// The reverse: on the K40, whose convolutions are slow beside its PCIe link,
// cifar_resnet in one round at 0.75 of its memory offloads convolution
// outputs (the copies hide under the compute stream) and recomputes none.
// This is the rules' price per victim; the refinement, which may fix a
// single block's choice either way by simulation, is left out.
TEST(ConvRecompute, WhereTheCopyHidesConvolutionOutputsAreOffloadedNotRecomputed) {
  const auto k40 = k40_one_round("cifar_resnet", 75, /*refine_blocks=*/false);
  ASSERT_TRUE(k40);
  const Tdfg& tdfg = k40->tdfg;
  const PlanResult& r = k40->planned;
  EXPECT_FALSE(recomputes_a_convolution(r.plan, tdfg));
  int offloaded = 0;
  for (const Step& s : r.plan.steps) {
    if (s.kind != StepKind::offload) continue;
    const BlockId b = r.plan.buffers[static_cast<size_t>(s.buffer)].block;
    for (TaskId w : tdfg.blocks[static_cast<size_t>(b)].writers) offloaded += tdfg.tasks[static_cast<size_t>(w)].has_algorithms;
  }
  EXPECT_GT(offloaded, 0);
}

// What the recomputed convolutions of a plan rerun.
struct RecomputedConvolutions {
  int checked = 0, with_workspace = 0, not_fastest = 0;
};

// Every recomputed convolution of `plan` reruns the algorithm its first run
// chose (codegen reads it from the choice), in that choice's time and with
// a workspace at least that large.
void check_reruns(const Plan& plan, const Tdfg& tdfg, const CostModel& cost, RecomputedConvolutions* seen) {
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute || !s.recompute || !tdfg.tasks[static_cast<size_t>(s.task)].has_algorithms)
      continue;
    for (const TaskChoice& c : plan.choices) {
      if (c.task != s.task || c.round != s.round) continue;
      if (c.workspace_bytes == 0) {
        EXPECT_EQ(s.workspace, kNoBuffer) << "step " << s.index;
      } else {
        ASSERT_GE(s.workspace, 0) << "step " << s.index;
        EXPECT_GE(plan.buffers[static_cast<size_t>(s.workspace)].bytes, c.workspace_bytes) << "step " << s.index;
        ++seen->with_workspace;
      }
      EXPECT_NEAR(s.end_ms - s.start_ms, c.time_ms, 1e-9 * c.time_ms) << "step " << s.index;
      seen->not_fastest += c.algorithm != cost.options(tdfg, s.task, c.sub_batch).front().algorithm;
      ++seen->checked;
    }
  }
}

// In ResNet-50's plan at M / 2 and at M / 3 without early drops on the H200
// (which recompute convolutions whose algorithm needs a workspace), and in
// ResNet-18's and googlenet's at 0.4 of their memory, one round, on the K40
// (where a recomputed convolution first ran a leaner option than its
// fastest, for room).
TEST(ConvRecompute, ARecomputedConvolutionHasItsFirstRunsWorkspace) {
  const TightResnet50& r = tight_resnet50();
  ASSERT_TRUE(r.cost);
  const PlanResult third = plan_at(r, r.memory_bytes / 3, WorkspaceUse::undivided, /*recompute_convolutions=*/true,
                                   /*early_drops=*/false);
  ASSERT_TRUE(third.feasible) << third.note;
  RecomputedConvolutions seen;
  check_reruns(r.plan, r.tdfg, *r.cost, &seen);
  check_reruns(third.plan, r.tdfg, *r.cost, &seen);
  for (const char* stem : {"resnet18", "googlenet"}) {
    const auto k40 = k40_one_round(stem, 40);
    ASSERT_TRUE(k40) << stem;
    check_reruns(k40->planned.plan, k40->tdfg, *k40->cost, &seen);
  }
  EXPECT_GT(seen.checked, 0);
  EXPECT_GT(seen.with_workspace, 0) << "no recomputed convolution whose algorithm needs a workspace";
  EXPECT_GT(seen.not_fastest, 0) << "every recomputed convolution's first run took its fastest option";
}

// At M / 3 without early drops the plan recomputes a convolution whose
// algorithm needs a workspace; without it, or with a smaller one, the rerun
// could not run the first run's algorithm.
TEST(ConvRecompute, AWorkspaceMissingOrTooSmallIsReported) {
  const TightResnet50& r = tight_resnet50();
  ASSERT_TRUE(r.cost);
  const PlanResult tighter = plan_at(r, r.memory_bytes / 3, WorkspaceUse::undivided, /*recompute_convolutions=*/true,
                                     /*early_drops=*/false);
  ASSERT_TRUE(tighter.feasible) << tighter.note;
  ASSERT_TRUE(verify_plan(tighter.plan, r.tdfg).empty());
  const int at = recomputed_conv_with_workspace(tighter.plan, r.tdfg);
  ASSERT_GE(at, 0) << "no recomputed convolution with a workspace";
  {
    Plan plan = tighter.plan;
    plan.steps[static_cast<size_t>(at)].workspace = kNoBuffer;
    const auto v = verify_plan(plan, r.tdfg);
    EXPECT_TRUE(has_kind(v, ViolationKind::bad_step)) << describe(v);
  }
  {
    Plan plan = tighter.plan;
    Buffer& w = plan.buffers[static_cast<size_t>(plan.steps[static_cast<size_t>(at)].workspace)];
    w.bytes = 256;
    const auto v = verify_plan(plan, r.tdfg);
    bool named = false;
    for (const Violation& x : v) named |= x.kind == ViolationKind::bad_step && x.message.find("recomputed") != std::string::npos;
    EXPECT_TRUE(named) << describe(v);
  }
}

// In the WD pool every conv workspace lies at the pool's start, one at a
// time: a recomputation could not have one of its own, so no convolution is
// recomputed there.
TEST(ConvRecompute, NoConvolutionIsRecomputedInTheWorkspacePool) {
  const TightResnet50& r = tight_resnet50();
  ASSERT_TRUE(r.cost);
  const PlanResult pooled = plan_at(r, r.memory_bytes / 2, WorkspaceUse::wd);
  ASSERT_TRUE(pooled.feasible) << pooled.note;
  EXPECT_FALSE(recomputes_a_convolution(pooled.plan, r.tdfg));
}

}  // namespace
}  // namespace mplan
