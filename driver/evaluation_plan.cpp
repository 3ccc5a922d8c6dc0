#include "driver/evaluation_plan.h"

#include <fmt/format.h>

#include "core/bytes.h"
#include "planner/verify.h"

namespace mplan::driver {
namespace {

Error internal(std::string message) { return Error{{}, std::move(message), ErrorKind::internal}; }

// The resident buffers of both plans: the same blocks at the same offsets.
Status same_resident_region(const Plan& training, const Plan& evaluation) {
  if (training.resident_region_bytes != evaluation.resident_region_bytes)
    return internal(fmt::format("internal error: the evaluation plan's resident region ({} bytes) is not the "
                                "training plan's ({} bytes)",
                                evaluation.resident_region_bytes, training.resident_region_bytes));
  std::vector<const Buffer*> a, b;
  for (const Buffer& buffer : training.buffers)
    if (buffer.resident) a.push_back(&buffer);
  for (const Buffer& buffer : evaluation.buffers)
    if (buffer.resident) b.push_back(&buffer);
  // Block ids differ between the graphs; names do not (Plan::block_names).
  auto name = [](const Plan& plan, const Buffer* buffer) {
    return buffer->block >= 0 && static_cast<size_t>(buffer->block) < plan.block_names.size()
               ? plan.block_names[static_cast<size_t>(buffer->block)]
               : std::string();
  };
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i)
    same = name(training, a[i]) == name(evaluation, b[i]) && !name(training, a[i]).empty() &&
           a[i]->offset == b[i]->offset && a[i]->bytes == b[i]->bytes;
  if (!same) return internal("internal error: the evaluation plan places the weights otherwise than the training plan");
  return Ok{};
}

}  // namespace

Result<EvaluationPlan> plan_evaluation(const Model& model, const CostModel& cost, const Plan& training) {
  EvaluationPlan out;
  out.tdfg = build_evaluation_tdfg(model);
  // mplan's search, whatever policy planned the training step: the forward
  // pass has no batch statistics (running ones), so any round will do.
  PlanOptions options;
  options.budget_bytes = training.budget_bytes;
  options.batch = training.batch;
  options.batchnorm_rounds = PlanOptions::BatchnormRounds::any;
  options.copy_engines = training.copy_engines;
  options.refine_blocks = false;
  out.planned = plan_iteration(out.tdfg, cost, options);
  if (!out.planned.feasible)
    return Error{{}, fmt::format("no evaluation plan within the budget that holds the training step: {}",
                                 out.planned.note),
                 ErrorKind::infeasible};
  Plan& plan = out.planned.plan;
  const CostModelInfo info = cost.info();
  plan.cost_model_kind = info.kind;
  plan.math_mode = info.math_mode;
  plan.cost_model_error = info.expected_error;
  plan.weight_copies_where_used = training.weight_copies_where_used;
  plan.compact_backward_layers = training.compact_backward_layers;
  plan.evaluation = true;
  if (plan.task_names.empty())
    for (const Task& t : out.tdfg.tasks) plan.task_names.push_back(t.name);
  if (plan.block_names.empty())
    for (const Block& b : out.tdfg.blocks) plan.block_names.push_back(b.name);
  if (is_16_bit(model.precision) && plan.block_types.empty())
    for (const Block& b : out.tdfg.blocks) plan.block_types.push_back(data_type_name(b.dtype));
  const std::vector<Violation> violations = verify_plan(plan, out.tdfg);
  if (!violations.empty())
    return internal(fmt::format("internal error: the evaluation plan fails verification: {}",
                                to_string(violations.front())));
  if (Status same = same_resident_region(training, plan); !same) return same.error();
  return out;
}

std::string evaluation_text(const Plan& evaluation) {
  return fmt::format("evaluation: batch {} as {} round{}, peak arena {}, {:.3f} ms simulated (evaluation-plan.json)",
                     evaluation.batch, evaluation.sub_batches.size(), evaluation.sub_batches.size() == 1 ? "" : "s",
                     format_bytes(evaluation.summary.peak_arena_bytes), evaluation.summary.simulated_ms);
}

}  // namespace mplan::driver
