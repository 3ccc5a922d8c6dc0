#include "profiler/cost_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace mplan {

std::string describe_cost_model(const CostModelInfo& info) {
  if (info.kind == "analytic")
    return fmt::format("analytic prediction (not a measurement), math {}; expected error: {} (docs/cost-model.md)",
                       info.math_mode, info.expected_error.empty() ? "unknown" : info.expected_error);
  if (info.kind == "measured") return fmt::format("measured, math {}", info.math_mode);
  return fmt::format("{}, math {}", info.kind, info.math_mode);
}

TaskOption fastest_option(const CostModel& model, const Tdfg& tdfg, TaskId t, int64_t sub_batch) {
  std::vector<TaskOption> options = model.options(tdfg, t, sub_batch);
  MPLAN_CHECK(!options.empty(), "cost model gave no option for " + tdfg.tasks.at(t).name);
  return options.front();
}

TaskOption leanest_option(const CostModel& model, const Tdfg& tdfg, TaskId t, int64_t sub_batch) {
  std::vector<TaskOption> options = model.options(tdfg, t, sub_batch);
  MPLAN_CHECK(!options.empty(), "cost model gave no option for " + tdfg.tasks.at(t).name);
  // min_element keeps the first of equals, and options come fastest first.
  return *std::min_element(options.begin(), options.end(), [](const TaskOption& a, const TaskOption& b) {
    return a.workspace_bytes < b.workspace_bytes;
  });
}

}  // namespace mplan
