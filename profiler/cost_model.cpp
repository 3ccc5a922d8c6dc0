#include "profiler/cost_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/analytic_model.h"

namespace mplan {

std::string describe_cost_model(const CostModelInfo& info) {
  if (info.kind == "analytic")
    return fmt::format("analytic prediction (not a measurement), math {}; expected error: {} (docs/cost-model.md)",
                       info.math_mode, info.expected_error.empty() ? "unknown" : info.expected_error);
  if (info.kind == "measured") return fmt::format("measured, math {}", info.math_mode);
  return fmt::format("{}, math {}", info.kind, info.math_mode);
}

bool recomputes_from_saved(const Tdfg& tdfg, TaskId t) {
  const Task& task = tdfg.tasks.at(t);
  return task.kind == TaskKind::FP && !task.recompute_writes.empty() && op_spec(task.op).recompute_from_saved;
}

double recompute_traffic_ratio(const TaskShape& shape, int64_t sub_batch) {
  if (shape.kind != TaskKind::FP || !op_spec(shape.op).recompute_from_saved) return 1.0;
  double first = 0, again = 0;
  for (const KernelWork& w : task_work(shape, sub_batch)) first += w.bytes;
  for (const KernelWork& w : task_work(shape, sub_batch, /*recompute=*/true)) again += w.bytes;
  return first > 0 ? std::min(1.0, again / first) : 1.0;
}

double CostModel::recompute_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch, const TaskOption& first_run) const {
  if (!recomputes_from_saved(tdfg, t)) return first_run.time_ms;
  if (const std::optional<double> own = recompute_from_saved_ms(tdfg, t, sub_batch)) return *own;
  return first_run.time_ms * recompute_traffic_ratio(describe_task(tdfg, t), sub_batch);
}

double streaming_ms_per_byte(const CostModel& model, const Tdfg& tdfg, int64_t sub_batch) {
  std::vector<double> large, all;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    if (task.kind != TaskKind::FP || task.has_algorithms) continue;
    double bytes = 0;
    for (const std::vector<BlockId>* list : {&task.reads, &task.writes})
      for (BlockId b : *list)
        if (!tdfg.blocks[b].resident) bytes += static_cast<double>(tdfg.blocks[b].bytes(sub_batch));
    if (bytes <= 0) continue;
    const double per_byte = fastest_option(model, tdfg, t, sub_batch).time_ms / bytes;
    all.push_back(per_byte);
    if (bytes >= kStreamingTrafficBytes) large.push_back(per_byte);
  }
  std::vector<double>& rates = large.empty() ? all : large;
  if (rates.empty()) return 0;
  std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
  return rates[rates.size() / 2];
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
