#pragma once
// The model as the planner runs it: the user's model, or the same with the
// memory-saving operator variants (tdfg/compact_backward.h) where they free a
// tensor of the backward pass, whichever plans faster (docs/planner.md,
// "Memory-saving variants"). Both compile and compare plan through it, so a
// compared row is the plan compile would write.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "planner/lower_bound.h"
#include "planner/planner.h"
#include "tdfg/tdfg.h"

namespace mplan::driver {

struct PlannedModel {
  std::unique_ptr<Model> model;  // owned: tdfg.model points to it
  Tdfg tdfg;
  PlanResult planned;
  // The layers given their compact backward (Layer::compact_backward); empty
  // for the plain model.
  std::vector<std::string> compact_layers;
  // The other candidate's time where both were planned and feasible; 0 if not.
  double other_ms = 0;
  // A 16-bit model's weight copies (docs/planner.md, "16-bit weight copies"):
  // made where used (Model::weight_copies_where_used) or resident, and the
  // other way's time where both were planned and feasible (0 if not, or if
  // the model keeps no copies).
  bool copies_where_used = false;
  bool copies_compared = false;  // both ways were planned
  double copies_other_ms = 0;
};

// A planner: one plan of a TDFG (plan_iteration with the caller's options).
using PlanOf = std::function<PlanResult(const Tdfg&)>;

// Plans the plain model and, where `variants` and some layer's compact
// backward frees a tensor, the model with those variants; keeps the faster
// feasible plan, the plain one on a tie. With batchnorm_rounds prefer_one a
// plan of one round is kept over a faster split one while it costs at most
// `batchnorm_tolerance` more (PlanOptions). With `at_once` the two are
// planned on two threads (`plan` must be safe to call so: plan_iteration
// with a cost model that does not measure when asked, CostModel).
PlannedModel plan_model(const Model& model, bool variants, const PlanOptions& options, const PlanOf& plan,
                        bool at_once = false);

// The lower bound (planner/lower_bound.h) under `budget_bytes` over every
// model plan_model may plan (the plain one and the one with its variants; a
// 16-bit model's with resident weight copies and with copies made where
// used), each with the arena its resident region leaves: no plan of any is
// faster, whichever was kept.
IterationLowerBound lower_bound_over_models(const Model& model, const CostModel& cost, int64_t budget_bytes,
                                           int64_t batch);

// One line for compile: which layers took their compact backward, and what
// that saved ("" for the plain model).
std::string variants_text(const PlannedModel& planned);
// One line for compile: how a 16-bit model's weight copies are made, and the
// other way's time ("" for a model without copies).
std::string weight_copies_text(const PlannedModel& planned);

// The model a plan was made for: the user's with the plan's memory-saving
// variants and its weight copies (what `mplan verify` and `inspect` rebuild
// the TDFG from). Error: a layer the model does not have, or copies made
// where used in a model that has none.
Result<Model> model_as_planned(const Model& model, const Plan& plan);

}  // namespace mplan::driver
