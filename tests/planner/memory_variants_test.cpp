// The memory-saving variants are a choice by simulated cost
// (driver/planned_model.h), one table-built scenario each way: where the
// compact kernels cost more and memory is plentiful, the plain model is
// planned; where the same penalty buys the room that the plain model must
// otherwise make by offloading or recomputing, the variants are taken.

#include <gtest/gtest.h>

#include "driver/planned_model.h"
#include "frontend/parse.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/compact_backward.h"

namespace mplan {
namespace {

// ResNet's stem at a size where its ReLU output dominates the memory.
constexpr const char* kStem =
    "name: stem\ninput: [3, 96, 96]\nbatch: 32\nclasses: 10\nlayers:\n"
    "  - {name: conv1, op: conv, out: 32, kernel: 3, pad: 1}\n"
    "  - {name: bn1, op: batchnorm}\n"
    "  - {name: relu1, op: relu}\n"
    "  - {name: pool1, op: pool, mode: max, kernel: 3, stride: 2, pad: 1}\n"
    "  - {name: conv2, op: conv, out: 16, kernel: 3, stride: 2, pad: 1}\n"
    "  - {name: gap, op: global_avgpool}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n"
    "  - {name: loss, op: softmax_xent}\n";

// The K40's analytic model, with `penalty_ms` added to every task of a layer
// that has its compact backward. At 0.12 ms (four tasks: about 8% of the
// stem's 6 ms) the variants lose where both models fit (+0.48 ms against the
// 0.23 ms their lighter backward saves) and win where the plain model must
// offload its ReLU output (about +0.9 ms).
class PenalisedCompact final : public CostModel {
 public:
  PenalisedCompact(const CostModel& inner, double penalty_ms) : inner_(inner), penalty_ms_(penalty_ms) {}
  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t b) const override {
    std::vector<TaskOption> o = inner_.options(tdfg, t, b);
    const Task& task = tdfg.tasks[t];
    if (task.kind != TaskKind::update && tdfg.model->layers[task.layer].compact_backward)
      for (TaskOption& option : o) option.time_ms += penalty_ms_;
    return o;
  }
  double host_to_device_ms(int64_t bytes) const override { return inner_.host_to_device_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return inner_.device_to_host_ms(bytes); }
  int copy_engines() const override { return inner_.copy_engines(); }
  int64_t device_memory_bytes() const override { return inner_.device_memory_bytes(); }
  std::string describe() const override { return "penalised " + inner_.describe(); }

 private:
  const CostModel& inner_;
  double penalty_ms_;
};

struct Scenario {
  Model model;
  AnalyticCostModel analytic;
};

Scenario stem() {
  Result<Model> model = parse_model(kStem, "stem.yaml");
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  return {*model, AnalyticCostModel(*device)};
}

driver::PlannedModel plan(const Model& model, const CostModel& cost, int64_t budget) {
  PlanOptions options;
  options.budget_bytes = budget;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  return driver::plan_model(model, true, options,
                            [&](const Tdfg& tdfg) { return plan_iteration(tdfg, cost, options); });
}

int64_t need(const driver::PlannedModel& p) {
  return p.planned.plan.resident_region_bytes + p.planned.plan.summary.peak_arena_bytes;
}

TEST(MemoryVariants, RefusedWhereTheyCostTimeAndMemoryIsPlentiful) {
  const Scenario s = stem();
  const PenalisedCompact cost(s.analytic, 0.12);
  const driver::PlannedModel p = plan(s.model, cost, int64_t{4} << 30);
  ASSERT_TRUE(p.planned.feasible) << p.planned.note;
  EXPECT_TRUE(p.compact_layers.empty()) << driver::variants_text(p);
  EXPECT_GT(p.other_ms, p.planned.iteration_ms()) << "the compact model was planned too, and is slower";
}

TEST(MemoryVariants, TakenWhereTheRoomTheyFreeIsWorthTheirCost) {
  const Scenario s = stem();
  const PenalisedCompact cost(s.analytic, 0.12);
  // At 4 GiB the plain model is planned (the test above). The budget is a
  // quarter of the way from the compact model's own need to the plain one's:
  // there the plain model must offload or recompute.
  const driver::PlannedModel plain_roomy = plan(s.model, cost, int64_t{4} << 30);
  PlanOptions options;
  options.budget_bytes = int64_t{4} << 30;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  const Model compact = with_compact_backward(s.model, compact_backward_layers(s.model));
  const Tdfg compact_tdfg = build_tdfg(compact);
  const PlanResult roomy = plan_iteration(compact_tdfg, cost, options);
  ASSERT_TRUE(roomy.feasible);
  const int64_t compact_need = roomy.plan.resident_region_bytes + roomy.plan.summary.peak_arena_bytes;
  ASSERT_LT(compact_need, need(plain_roomy)) << "the variants free memory";
  const int64_t budget = compact_need + (need(plain_roomy) - compact_need) / 4;

  const driver::PlannedModel p = plan(s.model, cost, budget);
  ASSERT_TRUE(p.planned.feasible) << p.planned.note;
  EXPECT_EQ(p.compact_layers, (std::vector<std::string>{"relu1", "pool1"})) << driver::variants_text(p);
  EXPECT_LT(p.planned.iteration_ms(), p.other_ms) << "the plain model's plan at this budget is slower";
  EXPECT_NE(driver::variants_text(p).find("relu1, pool1"), std::string::npos) << driver::variants_text(p);
}

TEST(MemoryVariants, TakenWhereOnlyTheyKeepOneRound) {
  // At the compact model's own need the plain model fits no round of the
  // whole batch (its pool's backward reads the ReLU's output beside both
  // gradients) and splits it, faster than the compact model's one round; with
  // --batchnorm one the split is only the fallback, so the variants are taken.
  const Scenario s = stem();
  const PenalisedCompact cost(s.analytic, 0.12);
  PlanOptions options;
  options.budget_bytes = int64_t{4} << 30;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  const Model compact = with_compact_backward(s.model, compact_backward_layers(s.model));
  const PlanResult roomy = plan_iteration(build_tdfg(compact), cost, options);
  ASSERT_TRUE(roomy.feasible);
  const int64_t budget = roomy.plan.resident_region_bytes + roomy.plan.summary.peak_arena_bytes;
  const driver::PlannedModel p = plan(s.model, cost, budget);
  ASSERT_TRUE(p.planned.feasible) << p.planned.note;
  EXPECT_EQ(p.compact_layers, (std::vector<std::string>{"relu1", "pool1"})) << driver::variants_text(p);
  EXPECT_EQ(p.planned.plan.sub_batches.size(), 1u);
  options.budget_bytes = budget;
  const PlanResult plain = plan_iteration(build_tdfg(s.model), cost, options);
  ASSERT_TRUE(plain.feasible) << plain.note;
  EXPECT_GT(plain.plan.sub_batches.size(), 1u) << "the plain model keeps one round at this budget";
  EXPECT_LT(p.other_ms, p.planned.iteration_ms()) << "the split is slower: not the case this test is for";
}

TEST(MemoryVariants, PlanningBothModelsAtOnceChoosesTheSamePlan) {
  const Scenario s = stem();
  const PenalisedCompact cost(s.analytic, 0.12);
  PlanOptions options;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  for (int64_t budget : {int64_t{4} << 30, int64_t{100} << 20}) {
    options.budget_bytes = budget;
    const driver::PlanOf plan_one = [&](const Tdfg& tdfg) { return plan_iteration(tdfg, cost, options); };
    const driver::PlannedModel one_by_one = driver::plan_model(s.model, true, options, plan_one, false);
    const driver::PlannedModel at_once = driver::plan_model(s.model, true, options, plan_one, true);
    EXPECT_EQ(at_once.compact_layers, one_by_one.compact_layers) << budget;
    EXPECT_EQ(at_once.planned.iteration_ms(), one_by_one.planned.iteration_ms()) << budget;
    EXPECT_EQ(at_once.other_ms, one_by_one.other_ms) << budget;
  }
}

TEST(MemoryVariants, OffWhenTurnedOff) {
  const Scenario s = stem();
  PlanOptions options;
  options.budget_bytes = int64_t{4} << 30;
  const driver::PlannedModel p = driver::plan_model(
      s.model, false, options, [&](const Tdfg& tdfg) { return plan_iteration(tdfg, s.analytic, options); });
  EXPECT_TRUE(p.compact_layers.empty());
  EXPECT_EQ(p.other_ms, 0);
}

}  // namespace
}  // namespace mplan
