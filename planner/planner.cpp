#include "planner/planner.h"

#include <algorithm>
#include <chrono>

#include "core/bytes.h"
#include "planner/plan_search.h"
#include "planner/sub_batch.h"
#include "profiler/memoized_cost_model.h"

namespace mplan {

double PlanResult::iteration_ms() const {
  return policy == PolicyKind::ideal ? plan.summary.ideal_ms : plan.summary.simulated_ms;
}

Result<Plan> PlanResult::take_plan() && {
  if (!feasible) return Error{{}, note, ErrorKind::infeasible};
  return std::move(plan);
}

namespace {

// The options' ranges: checked here once, where they enter the planner.
std::string range_error(const PlanOptions& options, int64_t batch) {
  if (options.budget_bytes <= 0) return "the memory budget must be positive";
  if (batch < 1) return "the batch must be at least 1";
  if (options.sub_batch < 0 || options.sub_batch > batch)
    return "sub-batch " + std::to_string(options.sub_batch) + " is not between 1 and the batch " +
           std::to_string(batch);
  if (options.copy_engines < 0 || options.copy_engines > 2)
    return "copy engines must be 1 or 2, not " + std::to_string(options.copy_engines);
  return "";
}

}  // namespace

PlanResult plan_iteration(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const int64_t batch = options.batch > 0 ? options.batch : tdfg.batch;
  PlanResult out;
  if (std::string why = range_error(options, batch); !why.empty()) {
    out.note = std::move(why);
  } else {
    const int64_t resident_region = resident_region_bytes(tdfg);
    const MemoizedCostModel memoized(cost, tdfg);  // the search asks for each task's options again and again
    out = search_plan(SearchInput{tdfg, memoized, options, batch, resident_region,
                                  align_down(options.budget_bytes - resident_region)});
    if (options.policy == PolicyKind::ideal) {
      out.feasible = out.plan.budget_bytes <= options.budget_bytes;
      out.note = "needs " + format_bytes(out.plan.budget_bytes) + (out.feasible ? "" : ", more than the budget");
    }
  }
  out.policy = options.policy;
  out.planner_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (out.feasible || options.policy == PolicyKind::ideal) out.plan.summary.planner_ms = out.planner_ms;
  return out;
}

int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  PlanOptions o;
  o.policy = PolicyKind::ideal;
  o.budget_bytes = 1;
  o.batch = batch;
  return plan_iteration(tdfg, cost, o).plan.budget_bytes;
}

int64_t minimum_feasible_budget(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes, int grid_points) {
  if (batch <= 0) batch = tdfg.batch;
  const int64_t ideal = ideal_budget_bytes(tdfg, cost, batch);
  if (policy == PolicyKind::ideal) return ideal;
  auto feasible = [&](int64_t budget) {
    PlanOptions o;
    o.policy = policy;
    o.budget_bytes = budget;
    o.batch = batch;
    return plan_iteration(tdfg, cost, o).feasible;
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
