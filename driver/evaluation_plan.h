#pragma once
// The evaluation pass as a second plan beside the training step
// (docs/generated-program.md, "Evaluation"): the model's forward pass alone
// (tdfg/tdfg.h TdfgOptions::evaluation), planned by mplan's search in the
// same budget, with the training plan's resident region, so that the
// program runs it between steps on the same weights.

#include <string>

#include "core/error.h"
#include "ops/model.h"
#include "planner/planner.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan::driver {

struct EvaluationPlan {
  Tdfg tdfg;          // of the model given to plan_evaluation (which must outlive it)
  PlanResult planned;
};

// Plans the evaluation of `model` (the one the training plan was made for)
// at the training plan's budget and batch. Errors: no plan fits (the budget
// holds the training step, so the forward pass alone should), a plan that
// fails verification, or resident buffers other than the training plan's
// (both internal).
Result<EvaluationPlan> plan_evaluation(const Model& model, const CostModel& cost, const Plan& training);

// One line for compile: the evaluation plan's rounds, peak and time.
std::string evaluation_text(const Plan& evaluation);

}  // namespace mplan::driver
