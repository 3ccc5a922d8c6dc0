#pragma once
// The search's plan of an example model on its committed H200 profile, one
// round (--batchnorm one), with its memory-saving variants beside it, as
// `mplan compile` and bench/tight_memory_bench.cpp plan it; checked by the
// verifier. For the planner's scenario tests on real models.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "driver/planned_model.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/verify.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan::testing {

// `options` with the budget and one round set; an empty result where the model or profile does not load.
inline PlanResult plan_one_round_on_the_h200(const std::string& stem, int64_t budget_bytes, PlanOptions options) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml");
  EXPECT_TRUE(model.ok());
  Result<Profile> profile = load_profile(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/" + stem + "-h200.json");
  EXPECT_TRUE(profile.ok());
  if (!model.ok() || !profile.ok()) return {};
  const Tdfg tdfg = build_tdfg(*model);
  Result<std::unique_ptr<RecordedCostModel>> cost = RecordedCostModel::create(*profile, tdfg, {}, stem);
  EXPECT_TRUE(cost.ok());
  if (!cost.ok()) return {};
  options.budget_bytes = budget_bytes;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  driver::PlannedModel planned = driver::plan_model(
      *model, true, options, [&](const Tdfg& candidate) { return plan_iteration(candidate, **cost, options); });
  EXPECT_TRUE(planned.planned.feasible) << planned.planned.note;
  if (planned.planned.feasible) {
    EXPECT_TRUE(verify_plan(planned.planned.plan, planned.tdfg).empty());
  }
  return std::move(planned.planned);
}

// The plan made with a lever names it in its policy line; the plan without does not.
inline void expect_only_the_first_names(const PlanResult& with, const PlanResult& without, const std::string& lever) {
  EXPECT_NE(with.note.find(lever), std::string::npos) << with.note;
  EXPECT_EQ(without.note.find(lever), std::string::npos) << without.note;
}

}  // namespace mplan::testing
