#include "driver/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "core/bytes.h"
#include "driver/model_input.h"
#include "driver/planned_model.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "planner/verify.h"
#include "tdfg/tdfg.h"

namespace mplan::driver {
namespace {

Error usage(std::string message) { return Error{{}, std::move(message), ErrorKind::usage}; }

Result<std::vector<PolicyKind>> parse_policy_list(const std::string& text) {
  if (text.empty()) return all_policies();
  std::vector<PolicyKind> out;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    PolicyKind kind;
    if (!parse_policy(name, &kind)) {
      std::string known;
      for (PolicyKind k : all_policies()) known += std::string(known.empty() ? "" : ", ") + policy_name(k);
      return usage("--policies: unknown policy '" + name + "'; expected some of: " + known);
    }
    out.push_back(kind);
  }
  return out;
}

// mplan's row: the baselines split batchnorm models by time alone, and so
// does mplan's row; its note gives compile's default (one round where that
// costs little more).
// As compile, it plans the model with and without its memory-saving variants
// (driver/planned_model.h) and keeps the faster.
PlannedModel mplan_row(const Model& model, const CostModel& cost, const PlanOptions& options) {
  PlanOptions any = options;
  any.policy = PolicyKind::mplan;
  any.batchnorm_rounds = PlanOptions::BatchnormRounds::any;
  PlannedModel planned = plan_model(
      model, true, any, [&](const Tdfg& candidate) { return plan_iteration(candidate, cost, any); },
      !cost.measures_when_asked());
  PlanResult& row = planned.planned;
  if (!planned.compact_layers.empty())
    row.note += fmt::format("{}compact backward of {} layer{}", row.note.empty() ? "" : "; ",
                            planned.compact_layers.size(), planned.compact_layers.size() == 1 ? "" : "s");
  if (planned.copies_where_used)
    row.note += fmt::format("{}16-bit weight copies made where used", row.note.empty() ? "" : "; ");
  if (!has_batch_statistics(planned.tdfg)) return planned;
  PlanOptions preferred_options = options;
  preferred_options.policy = PolicyKind::mplan;
  const PlanResult preferred = plan_iteration(planned.tdfg, cost, preferred_options);
  if (row.feasible && preferred.feasible && preferred.plan.sub_batches.size() != row.plan.sub_batches.size())
    row.note += fmt::format("; batchnorm split by time, as the baselines do (compile's default "
                            "--batchnorm prefer-one: {:.1f} ms in {} round{})",
                            preferred.iteration_ms(), preferred.plan.sub_batches.size(),
                            preferred.plan.sub_batches.size() == 1 ? "" : "s");
  return planned;
}

// The ranks' joint step with the policy's plan on every rank, and with its staggering.
void joint_rows(const Tdfg& tdfg, const CostModel& cost, const RankMachine& machine, const PlanOptions& options,
                CompareRow& row) {
  DataParallelOptions dp;
  dp.ranks = machine.ranks;
  dp.stagger = Stagger::none;
  row.joint_ms = plan_data_parallel(tdfg, cost, machine.machine, options, dp, row.planned).timing.step_ms;
  if (options.policy != PolicyKind::mplan && !is_vdnn_policy(options.policy)) return;
  dp.stagger = options.policy == PolicyKind::mplan ? Stagger::search : Stagger::paper;
  const RankPlans staggered = plan_data_parallel(tdfg, cost, machine.machine, options, dp, row.planned);
  row.staggered_ms = staggered.timing.step_ms;
  row.staggered_policy = staggered.policy;
}

}  // namespace

Result<CompareSettings> check_compare_flags(const CompareFlags& f) {
  CompareSettings s;
  Result<int64_t> budget = parse_bytes(f.budget);
  if (!budget) return usage("--budget: " + budget.error().message);
  if (*budget <= 0) return usage("--budget: must be positive, not " + f.budget);
  if (f.batch_given && f.batch <= 0) return usage("--batch: must be a positive number of samples");
  if (!f.device.empty() && !f.profile.empty())
    return usage("--device and --profile exclude each other: a profile names its own device");
  Result<std::vector<PolicyKind>> policies = parse_policy_list(f.policies);
  if (!policies) return policies.error();
  Result<std::optional<Precision>> precision = precision_flag(f.precision);
  if (!precision) return precision.error();
  s.precision = *precision;
  s.model_path = f.model_path;
  s.cost = CostSource{f.device, f.profile, false};
  s.budget_bytes = *budget;
  s.batch = f.batch_given ? f.batch : 0;
  s.policies = std::move(policies).value();
  s.min_budget = f.min_budget;
  s.verify = !f.no_verify;
  s.allow_oversubscribe = f.allow_oversubscribe;
  Result<DataParallelSettings> ranks = check_data_parallel_flags({f.gpus, f.machine, "", ""}, PolicyKind::mplan);
  if (!ranks) return ranks.error();
  s.data_parallel = *ranks;
  return s;
}

Result<CompareResult> compare(const CompareSettings& s) {
  Result<RankMachine> machine = load_rank_machine(s.data_parallel);
  if (!machine) return machine.error();
  CostSource cost_source = s.cost;
  if (!machine->standalone && cost_source.device.empty() && cost_source.profile.empty()) {
    const Device& gpu = machine->machine.gpus[0].device;
    cost_source.device = gpu.source_file.empty() ? gpu.name : gpu.source_file;
  }
  Result<ModelInput> loaded = load_model_input(s.model_path, s.batch, s.precision);
  if (!loaded) return loaded.error();
  int64_t share = s.batch;
  if (machine->ranks > 1) {
    Result<int64_t> divided =
        rank_batch(s.batch > 0 ? s.batch : loaded->model.batch, machine->ranks, s.batch > 0);
    if (!divided) return divided.error();
    share = *divided;
    loaded = load_model_input(s.model_path, share, s.precision);
    if (!loaded) return loaded.error();
  }
  const Model& model = loaded->model;
  const int64_t batch = share > 0 ? share : model.batch;
  if (Status checked = check_batch(model, batch, "--batch"); !checked)
    return Error{{}, checked.error().message, ErrorKind::usage};
  const Tdfg tdfg = build_tdfg(model);
  Result<LoadedCostModel> loaded_cost = make_cost_model(cost_source, model, s.model_path, tdfg, batch);
  if (!loaded_cost) return loaded_cost.error();
  const CostModel& cost = *loaded_cost->model;
  if (s.budget_bytes > cost.device_memory_bytes() && !s.allow_oversubscribe)
    return usage(fmt::format("--budget {} is more than the device's memory ({}, {}); pass --allow-oversubscribe "
                             "to compare at it anyway",
                             format_bytes(s.budget_bytes), format_bytes(cost.device_memory_bytes()),
                             cost.describe()));
  CompareResult out;
  out.model_name = model.name;
  out.precision = model.precision;
  out.cost_model = cost.describe();
  out.budget_bytes = s.budget_bytes;
  out.batch = batch;
  out.tasks = tdfg.tasks.size();
  out.blocks = tdfg.blocks.size();
  out.warnings = loaded_cost->warnings;
  out.ranks = machine->ranks;
  if (machine->ranks > 1) {
    complete_standalone(*machine, cost, loaded_cost->device_name);
    out.ranks_line = machine->line;
  }
  PlanOptions options;
  options.budget_bytes = s.budget_bytes;
  options.batch = batch;
  options.policy = PolicyKind::ideal;
  out.ideal = plan_iteration(tdfg, cost, options);
  const int64_t ideal_budget = out.ideal.plan.budget_bytes;
  for (size_t i = 0; i < s.policies.size(); ++i) {
    const PolicyKind kind = s.policies[i];
    if (s.on_policy) s.on_policy(kind, i);
    CompareRow row;
    options.policy = kind;
    std::optional<PlannedModel> mplan;  // its model and TDFG, for the verifier
    if (kind == PolicyKind::mplan) mplan = mplan_row(model, cost, options);
    row.planned = kind == PolicyKind::ideal   ? out.ideal
                  : kind == PolicyKind::mplan ? mplan->planned
                                              : plan_iteration(tdfg, cost, options);
    const Tdfg& planned_tdfg = mplan ? mplan->tdfg : tdfg;
    const Plan& plan = row.planned.plan;
    if (row.planned.feasible || kind == PolicyKind::ideal) {
      row.peak_bytes = plan.resident_region_bytes + plan.summary.peak_arena_bytes;
      if (s.verify) {
        VerifiedFigures figures;
        const std::vector<Violation> v = verify_plan(plan, planned_tdfg, &figures);
        row.violations = static_cast<int>(v.size());
        row.prefetches_freed_unread = static_cast<int>(figures.prefetches_freed_unread);
        if (!v.empty()) row.first_violation = to_string(v.front());
      }
    }
    if (machine->ranks > 1 && row.planned.feasible && kind != PolicyKind::ideal)
      joint_rows(planned_tdfg, cost, *machine, options, row);
    // To 0.1% of the ideal's need (at least 4 KiB): planner/planner.h says how.
    if (s.min_budget)
      row.min_budget_bytes =
          minimum_feasible_budget(kind, tdfg, cost, batch, std::max<int64_t>(4096, ideal_budget / 1024));
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace mplan::driver
