#include "planner/policy.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "frontend/bytes.h"
#include "planner/plan_limits.h"
#include "planner/planner.h"
#include "planner/policies/baselines.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace {

struct NamedPolicy {
  PolicyKind kind;
  const char* name;
};
constexpr NamedPolicy kPolicies[] = {
    {PolicyKind::ideal, "ideal"},
    {PolicyKind::vdnn_all_m, "vdnn-all-m"},
    {PolicyKind::vdnn_all_p, "vdnn-all-p"},
    {PolicyKind::vdnn_conv_m, "vdnn-conv-m"},
    {PolicyKind::vdnn_conv_p, "vdnn-conv-p"},
    {PolicyKind::vdnn_dyn, "vdnn-dyn"},
    {PolicyKind::vdnn_plus, "vdnn+"},
    {PolicyKind::superneurons, "superneurons"},
    {PolicyKind::modnn, "modnn"},
    {PolicyKind::mplan, "mplan"},
};

double sum_of_fastest_ms(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    ms += fastest_option(cost, tdfg, t, t == tdfg.update_task ? 1 : batch).time_ms;
  }
  return ms;
}

// The header fields the simulators leave to their caller (as make_plan fills them).
void fill_header(Plan* plan, const Tdfg& tdfg, const CostModel& cost, int64_t budget, int64_t batch) {
  plan->model_name = tdfg.model->name;
  plan->model_digest = plan_model_digest(*tdfg.model);
  plan->device = cost.describe();
  plan->budget_bytes = budget;
  plan->resident_bytes = tdfg.resident_bytes();
  plan->batch = batch;
  plan->summary.ideal_ms = sum_of_fastest_ms(tdfg, cost, batch);
  if (plan->sub_batches.size() > 1) {
    plan->summary.notes.push_back("the batch of " + std::to_string(batch) + " runs as " +
                                  std::to_string(plan->sub_batches.size()) +
                                  " sub-batches; gradients accumulate and the update runs once");
    for (const Layer& l : tdfg.model->layers) {
      if (l.op == Op::batchnorm) {
        plan->summary.notes.push_back("batchnorm statistics are per sub-batch");
        break;
      }
    }
  }
}

void take(PolicyOutcome* out, LayerSimResult sim) {
  out->feasible = sim.feasible;
  if (!sim.feasible) {
    out->note = sim.failure;
    return;
  }
  out->plan = std::move(sim.plan);
  out->simulated_ms = out->plan.summary.simulated_ms;
  out->recomputed_tasks = sim.recomputed_tasks;
  out->recompute_steps = std::move(sim.recompute_steps);
  out->offloaded_blocks = std::move(sim.offloaded_blocks);
}

// vDNN+ (moDNN §V-B): vDNN's dynamic policy at moDNN's sub-batch candidates
// (Eq. 3 start, planner/sub_batch.h); the fastest feasible one. If none is
// feasible, halves the smallest candidate down to 1.
void run_vdnn_plus(PolicyOutcome* out, const Tdfg& tdfg, const CostModel& cost, int64_t batch, int64_t arena) {
  int64_t bmax = largest_feasible_sub_batch(tdfg, cost, arena, batch);
  if (bmax < 1) {
    out->note = "no sub-batch fits the arena of " + format_bytes(arena);
    return;
  }
  int64_t b0 = std::min(eq3_sub_batch(tdfg, cost, arena, batch), bmax);
  std::vector<int64_t> candidates = sub_batch_candidates(batch, b0, bmax, 8);
  bool have = false;
  std::string last_failure;
  auto consider = [&](int64_t b) {
    BaselineRun run{split_batch(batch, b), arena, 1};
    VdnnDynResult r = run_vdnn_dyn(tdfg, cost, run);
    if (!r.sim.feasible) {
      last_failure = "sub-batch " + std::to_string(b) + ": " + r.sim.failure;
      return;
    }
    if (!have || r.sim.plan.summary.simulated_ms < out->simulated_ms) {
      take(out, std::move(r.sim));
      out->note = "sub-batch " + std::to_string(b) + ", " + r.pass;
      have = true;
    }
  };
  for (int64_t b : candidates) consider(b);
  for (int64_t b = candidates.front() / 2; !have && b >= 1 && check_rounds(tdfg, batch, b).ok(); b /= 2) consider(b);
  if (!have) {
    out->feasible = false;
    out->note = last_failure;
  }
}

}  // namespace

bool has_scheduler_overrides(const PlanOptions& scheduler) {
  const PlanOptions d;
  return scheduler.copy_engines != d.copy_engines || scheduler.sub_batch != d.sub_batch ||
         scheduler.max_sub_batch_candidates != d.max_sub_batch_candidates ||
         scheduler.screen_sub_batches != d.screen_sub_batches ||
         scheduler.select_algorithms != d.select_algorithms || scheduler.prefetch != d.prefetch ||
         scheduler.prefetch_lookahead_tasks != d.prefetch_lookahead_tasks ||
         scheduler.large_block_divisor != d.large_block_divisor || scheduler.workspace != d.workspace ||
         scheduler.workspace_bytes != d.workspace_bytes;
}

const char* policy_name(PolicyKind kind) {
  for (const NamedPolicy& p : kPolicies) {
    if (p.kind == kind) return p.name;
  }
  return "?";
}

bool parse_policy(const std::string& name, PolicyKind* kind) {
  for (const NamedPolicy& p : kPolicies) {
    if (name == p.name) {
      *kind = p.kind;
      return true;
    }
  }
  return false;
}

std::vector<PolicyKind> all_policies() {
  std::vector<PolicyKind> out;
  for (const NamedPolicy& p : kPolicies) out.push_back(p.kind);
  return out;
}

int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  LayerSimResult r = run_ideal(tdfg, cost, batch);
  MPLAN_CHECK(r.feasible, "the ideal plan has unlimited memory");
  return r.plan.resident_region_bytes + align_up(r.plan.summary.peak_arena_bytes);
}

PolicyOutcome run_policy(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, const PolicyOptions& options) {
  auto started = std::chrono::steady_clock::now();
  MPLAN_CHECK(tdfg.model != nullptr, "the TDFG has no model");
  MPLAN_CHECK(options.budget_bytes > 0, "the budget must be positive");
  int64_t batch = options.batch > 0 ? options.batch : tdfg.model->batch;
  int64_t arena = align_down(options.budget_bytes - resident_region_bytes(tdfg));
  PolicyOutcome out;
  out.kind = kind;
  // Issue 12: a plan's rounds are bounded before anything is simulated.
  if (kind != PolicyKind::ideal) {
    Status limit = check_plan_size(tdfg, cost, arena, batch, options.scheduler.sub_batch);
    if (!limit) {
      out.note = limit.error().message;
      return out;
    }
  }
  int64_t plan_budget = options.budget_bytes;
  BaselineRun full{{batch}, arena, 1};
  auto vdnn = [&](VdnnOffload o, VdnnAlgorithms a) { take(&out, run_vdnn(tdfg, cost, full, o, a)); };

  // moDNN's scheduler says itself why a budget is too small (Eq. 2's minimum
  // and the task that sets it).
  const bool scheduler = kind == PolicyKind::modnn || kind == PolicyKind::mplan;
  if (arena <= 0 && kind != PolicyKind::ideal && !scheduler) {
    out.note = "the budget " + format_bytes(options.budget_bytes) + " does not hold the resident weights (" +
               format_bytes(resident_region_bytes(tdfg)) + ")";
  } else {
    switch (kind) {
      case PolicyKind::ideal: {
        take(&out, run_ideal(tdfg, cost, batch));
        // Its own budget: exactly what it needs (unlimited memory).
        Plan& p = out.plan;
        p.arena_bytes = align_up(p.summary.peak_arena_bytes);
        plan_budget = p.resident_region_bytes + p.arena_bytes;
        out.feasible = plan_budget <= options.budget_bytes;
        out.simulated_ms = sum_of_fastest_ms(tdfg, cost, batch);
        out.note = "needs " + format_bytes(plan_budget) + (out.feasible ? "" : ", more than the budget");
        break;
      }
      case PolicyKind::vdnn_all_m: vdnn(VdnnOffload::all, VdnnAlgorithms::memory_optimal); break;
      case PolicyKind::vdnn_all_p: vdnn(VdnnOffload::all, VdnnAlgorithms::performance_optimal); break;
      case PolicyKind::vdnn_conv_m: vdnn(VdnnOffload::conv, VdnnAlgorithms::memory_optimal); break;
      case PolicyKind::vdnn_conv_p: vdnn(VdnnOffload::conv, VdnnAlgorithms::performance_optimal); break;
      case PolicyKind::vdnn_dyn: {
        VdnnDynResult r = run_vdnn_dyn(tdfg, cost, full);
        std::string pass = r.pass;
        take(&out, std::move(r.sim));
        if (out.feasible) out.note = pass;
        break;
      }
      case PolicyKind::vdnn_plus: run_vdnn_plus(&out, tdfg, cost, batch, arena); break;
      case PolicyKind::superneurons: {
        BaselineRun run{{batch}, arena, cost.copy_engines()};
        take(&out, run_superneurons(tdfg, cost, run));
        break;
      }
      case PolicyKind::modnn:
      case PolicyKind::mplan: {
        PlanOptions po = options.scheduler;
        po.budget_bytes = options.budget_bytes;
        po.batch = batch;
        if (kind == PolicyKind::modnn) {
          // moDNN as published: one copy stream (StrmD), the Eq. 3 sub-batch;
          // where the caller fixed either, theirs.
          if (po.copy_engines == 0) po.copy_engines = 1;
          if (po.sub_batch == 0) {
            int64_t bmax = largest_feasible_sub_batch(tdfg, cost, arena, batch);
            po.sub_batch = bmax >= 1 ? std::min(eq3_sub_batch(tdfg, cost, arena, batch), bmax) : 0;
          }
        }
        Result<Plan> plan = make_plan(tdfg, cost, po, &out.workspace_report);
        if (!plan.ok()) {
          out.note = plan.error().to_string();
          break;
        }
        out.plan = std::move(plan).value();
        out.feasible = true;
        out.simulated_ms = out.plan.summary.simulated_ms;
        out.note = "sub-batch " + std::to_string(out.plan.sub_batch);
        if (kind == PolicyKind::mplan && !has_scheduler_overrides(options.scheduler)) {
          // Our default keeps the fastest of moDNN's scheduler and the
          // layer-wise runtimes' rules (vDNN's configurations, also over
          // moDNN's sub-batch candidates, and SuperNeurons'): every one is a
          // plan of the same form, verified the same way, and the generated
          // program runs recomputation steps as forward calls.
          for (PolicyKind other : {PolicyKind::vdnn_all_m, PolicyKind::vdnn_all_p, PolicyKind::vdnn_conv_m,
                                   PolicyKind::vdnn_conv_p, PolicyKind::vdnn_dyn, PolicyKind::vdnn_plus,
                                   PolicyKind::superneurons}) {
            PolicyOptions layer_wise{options.budget_bytes, options.batch, {}};
            PolicyOutcome alt = run_policy(other, tdfg, cost, layer_wise);
            if (!alt.feasible || alt.simulated_ms >= out.simulated_ms) continue;
            std::string note = std::string(policy_name(other)) + "'s rules" +
                               (alt.note.empty() ? "" : " (" + alt.note + ")") + " beat moDNN's scheduler here";
            out = std::move(alt);
            out.kind = kind;
            out.note = note;
          }
        }
        break;
      }
    }
  }
  if (out.feasible || kind == PolicyKind::ideal) {
    if (kind != PolicyKind::modnn && kind != PolicyKind::mplan) fill_header(&out.plan, tdfg, cost, plan_budget, batch);
  }
  out.planner_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (out.feasible || kind == PolicyKind::ideal) out.plan.summary.planner_ms = out.planner_ms;
  return out;
}

int64_t minimum_feasible_budget(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes) {
  if (batch <= 0) batch = tdfg.model->batch;
  int64_t ideal = ideal_budget_bytes(tdfg, cost, batch);
  if (kind == PolicyKind::ideal) return ideal;
  // Twice the ideal's need: room for any policy's fragmentation.
  int64_t hi = 2 * ideal;
  auto feasible = [&](int64_t budget) {
    PolicyOptions o;
    o.budget_bytes = budget;
    o.batch = batch;
    return run_policy(kind, tdfg, cost, o).feasible;
  };
  if (!feasible(hi)) return -1;
  // Below moDNN's minimum (Eq. 2) no policy fits.
  int64_t lo = minimum_budget(tdfg, cost).bytes - 1;  // infeasible
  if (lo >= hi) return hi;
  if (feasible(lo + 1)) return lo + 1;
  resolution_bytes = std::max<int64_t>(resolution_bytes, kPlanAlignmentBytes);
  while (hi - lo > resolution_bytes) {
    int64_t mid = lo + (hi - lo) / 2;
    if (feasible(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace mplan
