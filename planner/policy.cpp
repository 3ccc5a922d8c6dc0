#include "planner/policy.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/bytes.h"
#include "planner/plan_search.h"
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

}  // namespace

const char* policy_name(PolicyKind kind) {
  for (const NamedPolicy& p : kPolicies)
    if (p.kind == kind) return p.name;
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

std::vector<PolicyKind> baseline_policies() {
  std::vector<PolicyKind> out;
  for (const NamedPolicy& p : kPolicies)
    if (p.kind != PolicyKind::ideal && p.kind != PolicyKind::mplan) out.push_back(p.kind);
  return out;
}

int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  PlanOptions o;
  o.budget_bytes = 1;
  Result<SearchResult> r = search_plan(PolicyKind::ideal, tdfg, cost, batch, o);
  MPLAN_CHECK(r.ok(), "the ideal plan has unlimited memory");
  return r->plan.budget_bytes;
}

PolicyOutcome run_policy(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, const PolicyOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  MPLAN_CHECK(tdfg.model != nullptr, "the TDFG has no model");
  MPLAN_CHECK(options.budget_bytes > 0, "the budget must be positive");
  const int64_t batch = options.batch > 0 ? options.batch : tdfg.model->batch;
  PlanOptions po = options.scheduler;
  po.budget_bytes = options.budget_bytes;
  po.batch = batch;
  PolicyOutcome out;
  out.kind = kind;
  Result<SearchResult> r = search_plan(kind, tdfg, cost, batch, po);
  if (!r.ok()) {
    out.note = r.error().message;
  } else {
    out.plan = std::move(r->plan);
    out.note = std::move(r->note);
    out.recomputed_tasks = r->recomputed_tasks;
    out.recompute_steps = std::move(r->recompute_steps);
    out.offloaded_blocks = std::move(r->offloaded_blocks);
    out.workspace_report = std::move(r->workspace_report);
    out.simulations = r->simulations;
    out.simulated_ms = out.plan.summary.simulated_ms;
    out.feasible = true;
    if (kind == PolicyKind::ideal) {
      out.simulated_ms = out.plan.summary.ideal_ms;
      out.feasible = out.plan.budget_bytes <= options.budget_bytes;
      out.note = "needs " + format_bytes(out.plan.budget_bytes) + (out.feasible ? "" : ", more than the budget");
    }
  }
  out.planner_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (out.feasible || kind == PolicyKind::ideal) out.plan.summary.planner_ms = out.planner_ms;
  return out;
}

int64_t minimum_feasible_budget(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes, int grid_points) {
  if (batch <= 0) batch = tdfg.model->batch;
  const int64_t ideal = ideal_budget_bytes(tdfg, cost, batch);
  if (kind == PolicyKind::ideal) return ideal;
  auto feasible = [&](int64_t budget) {
    PolicyOptions o;
    o.budget_bytes = budget;
    o.batch = batch;
    return run_policy(kind, tdfg, cost, o).feasible;
  };
  // Below moDNN's minimum (Eq. 2) no policy fits.
  const int64_t lo = minimum_budget(tdfg, cost).bytes;
  if (feasible(lo)) return lo;
  // Twice the ideal's need: room for any policy's fragmentation.
  const int64_t hi = std::max(2 * ideal, lo + 1);
  grid_points = std::max(grid_points, 2);
  resolution_bytes = std::max<int64_t>(resolution_bytes, kPlanAlignmentBytes);
  int64_t below = lo, found = -1;
  for (int i = 1; i <= grid_points; ++i) {
    const int64_t budget = lo + (hi - lo) * i / grid_points;
    if (feasible(budget)) {
      found = budget;
      break;
    }
    below = budget;
  }
  if (found < 0) return -1;
  // Bisection between the last infeasible grid point and the first feasible one.
  while (found - below > resolution_bytes) {
    const int64_t mid = below + (found - below) / 2;
    if (feasible(mid)) found = mid;
    else below = mid;
  }
  return found;
}

}  // namespace mplan
