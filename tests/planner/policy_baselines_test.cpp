// The scheduling policies of planner/policy.h: every feasible plan passes the
// independent verifier; the ideal's time is the sum of the fastest options;
// vDNN-all offloads every layer's input X and vDNN-conv only conv layers'
// (vDNN §III-C); budgets below a policy's need give an infeasible outcome,
// not a failure.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/parse.h"
#include "planner/deciders/deciders.h"
#include "planner/policy.h"
#include "tests/planner/policy_plan.h"
#include "planner/sub_batch.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

Model load_example(const std::string& name, int64_t batch = 0) {
  Result<Model> m = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().to_string());
  Model model = std::move(m).value();
  if (batch > 0) model.batch = batch;
  return model;
}

AnalyticCostModel k40() {
  Result<Device> d = load_device("k40");
  EXPECT_TRUE(d.ok());
  return AnalyticCostModel(*d);
}

void expect_verified(const PlanResult& o, const Tdfg& tdfg, const std::string& context) {
  std::vector<Violation> v = verify_plan(o.plan, tdfg);
  EXPECT_TRUE(v.empty()) << context << " " << policy_name(o.policy) << ": " << v.size() << " violations, first: "
                         << (v.empty() ? "" : to_string(v.front()));
}

// Every policy at budgets from the ideal's need down to moDNN's minimum: each
// outcome that says feasible carries a plan the verifier accepts and that
// fits the budget.
class PolicyVerifiedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyVerifiedTest, FeasiblePlansPassTheVerifier) {
  const Model model = load_example(GetParam());
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  const int64_t ideal = ideal_budget_bytes(tdfg, cost, model.batch);
  const int64_t minimum = minimum_budget(tdfg, cost).bytes;
  int feasible_count = 0;
  for (double fraction : {1.0, 0.7, 0.45, 0.25, 0.0}) {
    int64_t budget = minimum + static_cast<int64_t>(fraction * static_cast<double>(ideal - minimum));
    for (PolicyKind kind : all_policies()) {
      PlanOptions o;
      o.budget_bytes = budget;
      PlanResult out = testing::plan_with(kind, tdfg, cost, o);
      if (kind == PolicyKind::ideal) {
        expect_verified(out, tdfg, GetParam() + " (ideal's own budget)");
        continue;
      }
      if (!out.feasible) {
        EXPECT_FALSE(out.note.empty()) << policy_name(kind) << " says infeasible without a reason";
        continue;
      }
      ++feasible_count;
      EXPECT_LE(out.plan.resident_region_bytes + out.plan.arena_bytes, budget) << policy_name(kind);
      expect_verified(out, tdfg, GetParam() + " at " + std::to_string(budget) + " bytes");
    }
  }
  EXPECT_GT(feasible_count, 0);
}

INSTANTIATE_TEST_SUITE_P(ExampleModels, PolicyVerifiedTest,
                         ::testing::Values("cifar_small", "every_op", "every_op_nobn"));

// mplan and moDNN reach moDNN's minimum (Eq. 2); the ideal at its own need is feasible.
TEST(Policy, ModnnAndMplanFitTheEq2Minimum) {
  const Model model = load_example("cifar_small");
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = minimum_budget(tdfg, cost).bytes;
  EXPECT_TRUE(testing::plan_with(PolicyKind::mplan, tdfg, cost, o).feasible);
  EXPECT_TRUE(testing::plan_with(PolicyKind::modnn, tdfg, cost, o).feasible);
  // vDNN runs the whole batch: it cannot fit the per-sample minimum of a batch of 32.
  EXPECT_FALSE(testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, o).feasible);
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch);
  EXPECT_TRUE(testing::plan_with(PolicyKind::ideal, tdfg, cost, o).feasible);
  o.budget_bytes -= 1 << 20;
  EXPECT_FALSE(testing::plan_with(PolicyKind::ideal, tdfg, cost, o).feasible);
}

TEST(Policy, IdealTimeIsTheSumOfTheFastestTaskTimes) {
  const Model model = load_example("vgg16", 16);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  double sum_ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    sum_ms += cost.options(tdfg, t, t == tdfg.update_task ? 1 : model.batch).front().time_ms;
  }
  PlanOptions o;
  o.budget_bytes = int64_t{1} << 40;
  PlanResult ideal = testing::plan_with(PolicyKind::ideal, tdfg, cost, o);
  EXPECT_TRUE(ideal.feasible);
  EXPECT_NEAR(ideal.iteration_ms(), sum_ms, 1e-6 * sum_ms);
  EXPECT_EQ(ideal.plan.summary.bytes_to_host, 0);
  EXPECT_EQ(ideal.plan.summary.offload_count, 0);
  // Every task runs with its fastest option.
  for (const TaskChoice& c : ideal.plan.choices) {
    int64_t b = c.round == kOnceRound ? 1 : model.batch;
    EXPECT_EQ(c.algorithm, cost.options(tdfg, c.task, b).front().algorithm) << tdfg.tasks[c.task].name;
  }
  expect_verified(ideal, tdfg, "vgg16");
}

// vDNN §III-B/C: the input X of layer l is offloaded when FP(l) is its last
// forward consumer and the backward pass reads it again.
std::set<BlockId> expected_offloads(const Tdfg& tdfg, bool conv_only) {
  std::set<BlockId> out;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    if (task.kind != TaskKind::FP || (conv_only && task.op != Op::conv)) continue;
    for (BlockId b : task.reads) {
      const Block& block = tdfg.blocks[b];
      if (block.kind != BlockKind::output && block.kind != BlockKind::input) continue;
      bool later_forward = false, backward = false;
      for (TaskId r : block.readers) {
        if (r <= t) continue;
        if (tdfg.tasks[r].kind == TaskKind::FP) later_forward = true;
        else backward = true;
      }
      if (!later_forward && backward) out.insert(b);
    }
  }
  return out;
}

TEST(Policy, VdnnAllOffloadsEveryLayersInputAndConvOnlyConvLayers) {
  const Model model = load_example("vgg16", 16);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  // The ideal's need and half again: the layer-wise policies place blocks in
  // another order, so their fragmentation differs.
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch) * 3 / 2;
  PlanResult all = testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, o);
  PlanResult conv = testing::plan_with(PolicyKind::vdnn_conv_p, tdfg, cost, o);
  ASSERT_TRUE(all.feasible) << all.note;
  ASSERT_TRUE(conv.feasible) << conv.note;
  std::set<BlockId> all_expected = expected_offloads(tdfg, false);
  std::set<BlockId> conv_expected = expected_offloads(tdfg, true);
  // VGG-16: the 13 conv layers' inputs (X, and the ReLU / pool outputs before
  // them), the pools' inputs (max-pool backward reads X) and the linear layers' inputs.
  EXPECT_EQ(conv_expected.size(), 13u);
  EXPECT_GT(all_expected.size(), conv_expected.size());
  EXPECT_EQ(std::set<BlockId>(all.offloaded_blocks.begin(), all.offloaded_blocks.end()), all_expected);
  EXPECT_EQ(std::set<BlockId>(conv.offloaded_blocks.begin(), conv.offloaded_blocks.end()), conv_expected);
  for (BlockId b : conv.offloaded_blocks) {
    const Block& block = tdfg.blocks[b];
    bool read_by_conv = false;
    for (TaskId r : block.readers) {
      read_by_conv = read_by_conv || (tdfg.tasks[r].kind == TaskKind::FP && tdfg.tasks[r].op == Op::conv);
    }
    EXPECT_TRUE(read_by_conv) << block.name;
  }
  // Memory-optimal: every conv task without workspace; the plans verify.
  for (const TaskChoice& c : all.plan.choices) EXPECT_EQ(c.workspace_bytes, 0) << tdfg.tasks[c.task].name;
  expect_verified(all, tdfg, "vgg16");
  expect_verified(conv, tdfg, "vgg16");
  // Every offloaded byte comes back once (one round); the input batch X is
  // freed without a copy (the host has it) and loaded again for BP2(conv1).
  EXPECT_EQ(all.plan.summary.bytes_to_host + tdfg.blocks[tdfg.input_block].bytes(model.batch),
            all.plan.summary.bytes_to_device);
}

TEST(Policy, VdnnDynAdoptsNoOffloadWhenTheFastestFits) {
  const Model model = load_example("cifar_small");
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch) * 3 / 2;
  PlanResult dyn = testing::plan_with(PolicyKind::vdnn_dyn, tdfg, cost, o);
  ASSERT_TRUE(dyn.feasible) << dyn.note;
  EXPECT_EQ(dyn.note, "pass 2 (no offload, fastest)");
  EXPECT_EQ(dyn.plan.summary.offload_count, 0);
}

TEST(Policy, SuperNeuronsRecomputesCheapLayersAsForwardTasks) {
  const Model model = load_example("vgg16", 8);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch) * 3 / 2;
  PlanResult sn = testing::plan_with(PolicyKind::superneurons, tdfg, cost, o);
  ASSERT_TRUE(sn.feasible) << sn.note;
  EXPECT_GT(sn.recomputed_tasks, 0);
  for (int32_t s : sn.recompute_steps) {
    const Step& step = sn.plan.steps[s];
    EXPECT_EQ(step.kind, StepKind::compute);
    const Task& task = tdfg.tasks[step.task];
    EXPECT_EQ(task.kind, TaskKind::FP);
    EXPECT_TRUE(task.op == Op::relu || task.op == Op::pool || task.op == Op::lrn) << task.name;
  }
  expect_verified(sn, tdfg, "vgg16");
  // Below the ideal's need the tensor cache offloads conv outputs (LRU) and the plan still verifies.
  int64_t sn_min = minimum_feasible_budget(PolicyKind::superneurons, tdfg, cost, model.batch, 1 << 20);
  ASSERT_GT(sn_min, 0);
  EXPECT_LT(sn_min, ideal_budget_bytes(tdfg, cost, model.batch));
  o.budget_bytes = sn_min;
  PlanResult tight = testing::plan_with(PolicyKind::superneurons, tdfg, cost, o);
  ASSERT_TRUE(tight.feasible) << tight.note;
  EXPECT_GT(tight.plan.summary.offload_count, 0);
  expect_verified(tight, tdfg, "vgg16 at superneurons' minimum");
}

// The verifier accepts a recomputation only as a second run of an FP task
// that writes its output alone (planner/verify.cpp, Step::recompute).
TEST(Policy, VerifierRejectsMisplacedRecomputation) {
  const Model model = load_example("vgg16", 8);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch) * 3 / 2;
  PlanResult sn = testing::plan_with(PolicyKind::superneurons, tdfg, cost, o);
  ASSERT_TRUE(sn.feasible) << sn.note;
  ASSERT_FALSE(sn.recompute_steps.empty());
  // A recomputation marked as an ordinary run: the task runs twice.
  Plan twice = sn.plan;
  twice.steps[sn.recompute_steps.front()].recompute = false;
  std::vector<Violation> v = verify_plan(twice, tdfg);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front().kind, ViolationKind::coverage) << to_string(v.front());
  // A conv forward marked as a recomputation: its first run is missing.
  Plan conv = sn.plan;
  for (Step& s : conv.steps) {
    if (s.kind == StepKind::compute && tdfg.tasks[s.task].kind == TaskKind::FP && tdfg.tasks[s.task].op == Op::conv) {
      s.recompute = true;
      break;
    }
  }
  v = verify_plan(conv, tdfg);
  bool coverage = false;
  for (const Violation& x : v) coverage = coverage || x.kind == ViolationKind::coverage;
  EXPECT_TRUE(coverage);
}

// SuperNeurons §3.4 step 2: a recomputed block whose segment and backward
// need exceed l_peak (the largest layer's need) is memory-centric: freed
// after each backward use and recomputed for the next. ResNet-18's first
// batchnorm+ReLU block (Y[bn1+relu]) feeds the max pool, whose backward is the
// largest need: it is recomputed once per backward reader, not once.
TEST(Policy, SuperNeuronsRecomputesMemoryCentricBlocksForEachUse) {
  const Model model = load_example("resnet18", 32);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = ideal_budget_bytes(tdfg, cost, model.batch);
  PlanResult sn = testing::plan_with(PolicyKind::superneurons, tdfg, cost, o);
  ASSERT_TRUE(sn.feasible) << sn.note;
  std::map<std::pair<TaskId, int32_t>, int> runs;
  for (int32_t s : sn.recompute_steps) runs[{sn.plan.steps[s].task, sn.plan.steps[s].round}]++;
  int repeated = 0;
  for (const auto& [key, n] : runs) repeated += n > 1 ? 1 : 0;
  EXPECT_GT(repeated, 0) << "no block was recomputed memory-centric";
  expect_verified(sn, tdfg, "resnet18");
}

// vDNN Fig. 10 (findPrefetchLayer): before a layer's backward pass, prefetch
// the closest earlier layer that offloaded, but search no further than the
// first conv layer. cifar_small with vdnn-conv-m offloads the inputs of
// conv1 (X), conv2 and conv3. In the backward pass conv3's boundary prefetches
// conv2's input; at pool2's boundary the search meets conv2 (already
// prefetched) and stops, so X (conv1's input) is loaded again only at conv2's
// boundary, after BP1(pool2) -- not with pool2 as a search past conv2 would.
TEST(Policy, VdnnFindPrefetchLayerStopsAtAConv) {
  const Model model = load_example("cifar_small");
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  PlanOptions o;
  o.budget_bytes = int64_t{64} << 20;
  PlanResult conv = testing::plan_with(PolicyKind::vdnn_conv_m, tdfg, cost, o);
  ASSERT_TRUE(conv.feasible) << conv.note;
  const TaskId bp_pool2 = tdfg.bp1_of[model.find("pool2")];
  int bp_pool2_step = -1, reload = -1, loads = 0;
  for (const Step& s : conv.plan.steps) {
    if (s.kind == StepKind::compute && s.task == bp_pool2) bp_pool2_step = s.index;
    if (s.kind == StepKind::prefetch && conv.plan.buffers[s.buffer].block == tdfg.input_block && ++loads == 2)
      reload = s.index;
  }
  ASSERT_GE(bp_pool2_step, 0);
  ASSERT_GE(reload, 0) << "X must be loaded again for BP2(conv1)";
  EXPECT_GT(reload, bp_pool2_step);
  expect_verified(conv, tdfg, "cifar_small");
}

// SuperNeurons has every lever vDNN-all has (offloading any layer's output)
// and more (recomputation, the tensor cache): wherever vdnn-all-m finds a
// plan, superneurons does too, at every budget from Eq. 2's minimum to twice
// the ideal's need.
TEST(Policy, SuperNeuronsFeasibleWhereverVdnnAllIs) {
  for (const char* stem : {"cifar_small", "every_op", "every_op_nobn"}) {
    SCOPED_TRACE(stem);
    const Model model = load_example(stem);
    const Tdfg tdfg = build_tdfg(model);
    const AnalyticCostModel cost = k40();
    const int64_t lo = minimum_budget(tdfg, cost).bytes, hi = 2 * ideal_budget_bytes(tdfg, cost, model.batch);
    int vdnn_feasible = 0;
    for (int i = 0; i <= 40; ++i) {
      PlanOptions o;
      o.budget_bytes = lo + (hi - lo) * i / 40;
      if (!testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, o).feasible) continue;
      ++vdnn_feasible;
      PlanResult sn = testing::plan_with(PolicyKind::superneurons, tdfg, cost, o);
      EXPECT_TRUE(sn.feasible) << o.budget_bytes << " bytes: " << sn.note;
    }
    EXPECT_GT(vdnn_feasible, 10);
  }
}

TEST(Policy, NamesRoundTrip) {
  for (PolicyKind k : all_policies()) {
    PolicyKind parsed;
    ASSERT_TRUE(parse_policy(policy_name(k), &parsed));
    EXPECT_EQ(parsed, k);
  }
  PolicyKind unused;
  EXPECT_FALSE(parse_policy("vdnn", &unused));
}

TEST(Policy, MinimumFeasibleBudgetIsFeasibleAndOrdered) {
  const Model model = load_example("cifar_small");
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = k40();
  int64_t res = 64 << 10;
  int64_t mplan_min = minimum_feasible_budget(PolicyKind::mplan, tdfg, cost, 0, res);
  int64_t all_m = minimum_feasible_budget(PolicyKind::vdnn_all_m, tdfg, cost, 0, res);
  int64_t ideal = minimum_feasible_budget(PolicyKind::ideal, tdfg, cost, 0, res);
  EXPECT_EQ(ideal, ideal_budget_bytes(tdfg, cost, model.batch));
  EXPECT_EQ(mplan_min, minimum_budget(tdfg, cost).bytes);
  ASSERT_GT(all_m, 0);
  EXPECT_LE(mplan_min, all_m);
  PlanOptions o;
  o.budget_bytes = all_m;
  EXPECT_TRUE(testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, o).feasible);
  o.budget_bytes = all_m - res;
  EXPECT_FALSE(testing::plan_with(PolicyKind::vdnn_all_m, tdfg, cost, o).feasible);
}

}  // namespace
}  // namespace mplan
