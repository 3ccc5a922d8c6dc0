#include "codegen/plan_check.h"

#include <fmt/format.h>

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

}  // namespace

Status check_plan(const Model& model, const Tdfg& tdfg, const Plan& plan) {
  if (!plan.model_digest.empty() && plan.model_digest != model_digest(model))
    return codegen_error("the plan was made for another model (digest " + plan.model_digest + ", model '" +
                         model.name + "' has " + model_digest(model) + ")");
  if (plan.sub_batches.empty()) return codegen_error("the plan has no sub-batches");
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::compute) continue;
    if (step.task < 0 || step.task >= static_cast<TaskId>(tdfg.tasks.size()))
      return codegen_error(fmt::format("step {} names task {}, which the TDFG does not have", step.index, step.task));
    const Task& task = tdfg.tasks[step.task];
    // A recompute step lists the task's recompute signature (plan.h Step::recompute).
    const size_t reads = step.recompute ? task.recompute_reads.size() : task.reads.size();
    const size_t writes = step.recompute ? task.recompute_writes.size() : task.writes.size();
    if (step.recompute && (task.kind != TaskKind::FP || task.recompute_writes.empty()))
      return codegen_error(fmt::format("step {} recomputes {}, which has no recompute signature", step.index,
                                       task.name));
    if (step.reads.size() != reads || step.writes.size() != writes)
      return codegen_error(fmt::format("step {} ({}) lists {} reads and {} writes; the task has {} and {}", step.index,
                                       task.name, step.reads.size(), step.writes.size(), reads, writes));
    if (task.kind != TaskKind::update &&
        (step.round < 0 || step.round >= static_cast<int32_t>(plan.sub_batches.size())))
      return codegen_error(fmt::format("step {} ({}) has round {} of {}", step.index, task.name, step.round,
                                       plan.sub_batches.size()));
  }
  for (int32_t r = 0; r < static_cast<int32_t>(plan.sub_batches.size()); ++r)
    for (BlockId b : {tdfg.input_block, tdfg.labels_block})
      if (host_slot_of(plan, b, r) == kNoHostSlot)
        return codegen_error(fmt::format("the plan has no host slot for {} of round {}", tdfg.blocks[b].name, r));
  return Ok{};
}

}  // namespace mplan::codegen
