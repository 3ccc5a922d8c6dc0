// The plain model against its memory-saving variants (driver/planned_model.h).

#include "driver/planned_model.h"

#include <fmt/format.h>

#include <future>

#include "planner/sub_batch.h"
#include "tdfg/bounds.h"
#include "tdfg/compact_backward.h"

namespace mplan::driver {
namespace {

PlannedModel planned_for(Model model, const PlanOf& plan) {
  PlannedModel out;
  out.model = std::make_unique<Model>(std::move(model));
  out.tdfg = build_tdfg(*out.model);
  out.planned = plan(out.tdfg);
  out.compact_layers = compact_backward_names(*out.model);
  out.copies_where_used = out.model->weight_copies_where_used;
  return out;
}

Model with_copies_where_used(Model model) {
  model.weight_copies_where_used = true;
  return model;
}

// Whether `a` is the better plan: feasible, then one round against a split
// plan (with `one`, always: the split is only the fallback where no plan of
// one round fits; with `prefer_one`, within the tolerance), then faster.
bool better(const PlannedModel& a, const PlannedModel& b, const PlanOptions& options) {
  if (a.planned.feasible != b.planned.feasible) return a.planned.feasible;
  if (!a.planned.feasible) return false;
  const size_t rounds_a = a.planned.plan.sub_batches.size(), rounds_b = b.planned.plan.sub_batches.size();
  const bool one_against_split =
      rounds_a != rounds_b && (rounds_a == 1 || rounds_b == 1) && has_batch_statistics(a.tdfg);
  if (one_against_split && options.batchnorm_rounds == PlanOptions::BatchnormRounds::one) return rounds_a == 1;
  if (one_against_split && options.batchnorm_rounds == PlanOptions::BatchnormRounds::prefer_one) {
    const PlannedModel& one = rounds_a == 1 ? a : b;
    const PlannedModel& split = rounds_a == 1 ? b : a;
    const bool one_wins =
        one.planned.iteration_ms() <= (1.0 + options.batchnorm_tolerance) * split.planned.iteration_ms();
    return one_wins == (rounds_a == 1);
  }
  return a.planned.iteration_ms() < b.planned.iteration_ms();
}

}  // namespace

namespace {

// The plain model against the one with its variants, as the model makes its weight copies.
PlannedModel plan_variants(const Model& model, bool variants, const PlanOptions& options, const PlanOf& plan,
                           bool at_once) {
  const std::vector<LayerId> layers = variants ? compact_backward_layers(model) : std::vector<LayerId>{};
  if (layers.empty()) return planned_for(with_compact_backward(model, std::vector<LayerId>{}), plan);
  std::future<PlannedModel> other =
      std::async(at_once ? std::launch::async : std::launch::deferred,
                 [&] { return planned_for(with_compact_backward(model, layers), plan); });
  PlannedModel plain = planned_for(with_compact_backward(model, std::vector<LayerId>{}), plan);
  PlannedModel compact = other.get();
  const bool both = plain.planned.feasible && compact.planned.feasible;
  if (better(compact, plain, options)) {
    compact.other_ms = both ? plain.planned.iteration_ms() : 0;
    return compact;
  }
  plain.other_ms = both ? compact.planned.iteration_ms() : 0;
  return plain;
}

}  // namespace

PlannedModel plan_model(const Model& model, bool variants, const PlanOptions& options, const PlanOf& plan,
                        bool at_once) {
  PlannedModel resident = plan_variants(model, variants, options, plan, at_once);
  if (!has_weight_copies(model) || model.weight_copies_where_used) return resident;
  // A 16-bit model's weight copies: kept resident (the update remakes them),
  // or made where each task uses them, which frees their resident bytes for
  // the cost of a cast per use. The faster feasible plan, resident on a tie.
  PlannedModel where_used = planned_for(with_copies_where_used(*resident.model), plan);
  const bool both = resident.planned.feasible && where_used.planned.feasible;
  where_used.copies_compared = resident.copies_compared = true;
  if (better(where_used, resident, options)) {
    where_used.other_ms = resident.other_ms;
    where_used.copies_other_ms = both ? resident.planned.iteration_ms() : 0;
    return where_used;
  }
  resident.copies_other_ms = both ? where_used.planned.iteration_ms() : 0;
  if (!resident.planned.feasible && !where_used.planned.feasible)
    resident.planned.note += "; with the 16-bit weight copies made where they are used instead of resident: " +
                             where_used.planned.note;
  return resident;
}

std::string weight_copies_text(const PlannedModel& planned) {
  if (!has_weight_copies(*planned.model)) return "";
  std::string out = planned.copies_where_used
                        ? "weight copies: 16-bit, made where each task uses them (not resident)"
                        : "weight copies: 16-bit, resident, remade by the update";
  if (planned.copies_other_ms > 0)
    out += fmt::format(" ({:.3f} ms against {:.3f} ms {})", planned.planned.iteration_ms(), planned.copies_other_ms,
                       planned.copies_where_used ? "resident" : "made where used");
  else if (planned.copies_compared && planned.planned.feasible)
    out += planned.copies_where_used ? " (resident copies do not fit)" : " (made where used, they do not fit)";
  return out;
}

Result<Model> model_as_planned(const Model& model, const Plan& plan) {
  Result<Model> planned = with_compact_backward(model, plan.compact_backward_layers);
  if (!planned) return planned;
  if (plan.weight_copies_where_used) {
    if (!has_weight_copies(model))
      return Error{{}, fmt::format("the plan makes 16-bit weight copies where they are used, but model '{}' keeps "
                                   "none (precision {})",
                                   model.name, precision_name(model.precision))};
    planned->weight_copies_where_used = true;
  }
  return planned;
}

IterationLowerBound lower_bound_over_models(const Model& model, const CostModel& cost, int64_t budget_bytes,
                                           int64_t batch) {
  std::vector<std::vector<LayerId>> choices{{}};  // the plain model, and its variants where any pays
  if (std::vector<LayerId> layers = compact_backward_layers(model); !layers.empty()) choices.push_back(layers);
  // A 16-bit model's weight copies, resident or made where used (less
  // resident, so more arena).
  std::vector<bool> copies{model.weight_copies_where_used};
  if (has_weight_copies(model) && !model.weight_copies_where_used) copies.push_back(true);
  IterationLowerBound best;
  for (const std::vector<LayerId>& compact : choices)
    for (bool where_used : copies) {
      Model candidate = with_compact_backward(model, compact);
      candidate.weight_copies_where_used = where_used;
      const Tdfg tdfg = build_tdfg(candidate);
      const int64_t arena_bytes = budget_bytes - resident_region_bytes(tdfg);
      if (arena_bytes <= 0) continue;
      const IterationLowerBound bound =
          iteration_lower_bound(tdfg, cost, arena_bytes, batch, least_batchnorm_round(tdfg));
      if (bound.found && (!best.found || bound.ms < best.ms)) best = bound;
    }
  return best;
}

std::string variants_text(const PlannedModel& planned) {
  if (planned.compact_layers.empty()) return "";
  std::string names;
  for (size_t i = 0; i < planned.compact_layers.size() && i < 6; ++i)
    names += (i ? ", " : "") + planned.compact_layers[i];
  if (planned.compact_layers.size() > 6) names += fmt::format(", ... ({} layers)", planned.compact_layers.size());
  std::string out = fmt::format("memory-saving variants: compact backward of {}", names);
  if (planned.other_ms > 0)
    out += fmt::format(" ({:.3f} ms against {:.3f} ms without)", planned.planned.iteration_ms(), planned.other_ms);
  return out;
}

}  // namespace mplan::driver
