#include "planner/planner.h"

#include <chrono>

#include "planner/plan_search.h"

namespace mplan {

Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options) {
  return make_plan(tdfg, cost, options, nullptr);
}

Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options,
                       WorkspaceReport* report) {
  const auto started = std::chrono::steady_clock::now();
  MPLAN_CHECK(tdfg.model != nullptr, "the TDFG has no model");
  const int64_t batch = options.batch > 0 ? options.batch : tdfg.model->batch;
  Result<SearchResult> r = search_plan(PolicyKind::mplan, tdfg, cost, batch, options);
  if (!r.ok()) return r.error();
  if (report != nullptr) *report = std::move(r->workspace_report);
  Plan plan = std::move(r->plan);
  plan.summary.planner_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return plan;
}

}  // namespace mplan
