#include "profiler/cost_model.h"

#include <algorithm>

namespace mplan {

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
