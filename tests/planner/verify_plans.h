#pragma once
// Plans for the verifier, plan.json and trace tests: real plans from
// make_plan (analytic K40 cost model) on the shipped CIFAR-size model at
// budgets that force offloading, and helpers to corrupt them.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "frontend/parse.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace mplan::testing {

// A model, its TDFG and a plan of it; the Tdfg points at the Model, so both live here.
struct Planned {
  std::unique_ptr<Model> model;
  Tdfg tdfg;
  Plan plan;
};

inline std::string example_model_path(const std::string& stem) {
  return std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml";
}

// Plans `stem` (examples/models) on the K40 at `budget_bytes`; fails the test on an error.
inline Planned plan_example(const std::string& stem, int64_t budget_bytes, int copy_engines = 2,
                            int64_t sub_batch = 0, bool early_drops = true) {
  Planned p;
  Result<Model> model = load_model(example_model_path(stem));
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  p.model = std::make_unique<Model>(std::move(model).value());
  p.tdfg = build_tdfg(*p.model);
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  AnalyticCostModel cost(device.value());
  PlanOptions options;
  options.budget_bytes = budget_bytes;
  options.copy_engines = copy_engines;
  options.sub_batch = sub_batch;
  options.early_drops = early_drops;
  // One cuDNN call per convolution: the fixtures' shapes (offloads beside
  // prefetches, recomputed convolutions) do not depend on whether the auto
  // workspace mode finds micro-batches faster.
  options.workspace = WorkspaceUse::undivided;
  Result<Plan> plan = plan_iteration(p.tdfg, cost, options).take_plan();
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().to_string());
  if (plan.ok()) p.plan = std::move(plan).value();
  for (const Task& t : p.tdfg.tasks) p.plan.task_names.push_back(t.name);
  for (const Block& b : p.tdfg.blocks) p.plan.block_names.push_back(b.name);
  return p;
}

// cifar_small at batch 32, 3 MiB and sub-batch 7 on the K40, two copy
// engines, without early drops: the planner offloads, prefetches and
// recomputes (with early drops it recomputes instead of copying; left to
// choose, it runs 6 sub-batches there and offloads nothing).
inline const Planned& tight_cifar_small() {
  static const Planned p = plan_example("cifar_small", int64_t{3} << 20, /*copy_engines=*/2, /*sub_batch=*/7,
                                        /*early_drops=*/false);
  return p;
}

// Per host slot of a plan: the step of its first offload and of its last prefetch (-1: none).
struct SlotCopies {
  std::vector<int32_t> offload, prefetch;
};
inline SlotCopies slot_copies(const Plan& plan) {
  SlotCopies out{std::vector<int32_t>(plan.host_slots.size(), -1), std::vector<int32_t>(plan.host_slots.size(), -1)};
  for (const Step& s : plan.steps) {
    if (s.host_slot < 0) continue;
    if (s.kind == StepKind::offload && out.offload[s.host_slot] < 0) out.offload[s.host_slot] = s.index;
    if (s.kind == StepKind::prefetch) out.prefetch[s.host_slot] = s.index;
  }
  return out;
}

inline bool has_kind(const std::vector<Violation>& violations, ViolationKind kind) {
  return std::any_of(violations.begin(), violations.end(), [&](const Violation& v) { return v.kind == kind; });
}

inline std::string describe(const std::vector<Violation>& violations, size_t at_most = 20) {
  std::string out;
  for (size_t i = 0; i < violations.size() && i < at_most; ++i) out += to_string(violations[i]) + "\n";
  if (violations.size() > at_most) out += "...\n";
  return out;
}

// Removes step `index`, renumbering the later steps.
inline void erase_step(Plan& plan, size_t index) {
  plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(index));
  for (size_t i = 0; i < plan.steps.size(); ++i) plan.steps[i].index = static_cast<int32_t>(i);
}

// Moves step `from` to position `to` (issue order), renumbering.
inline void move_step(Plan& plan, size_t from, size_t to) {
  Step step = plan.steps[from];
  plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(from));
  plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(to), step);
  for (size_t i = 0; i < plan.steps.size(); ++i) plan.steps[i].index = static_cast<int32_t>(i);
}

// Counts of each step kind.
inline int count_steps(const Plan& plan, StepKind kind) {
  return static_cast<int>(std::count_if(plan.steps.begin(), plan.steps.end(),
                                        [&](const Step& s) { return s.kind == kind; }));
}

}  // namespace mplan::testing
