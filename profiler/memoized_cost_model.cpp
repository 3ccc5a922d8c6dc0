#include "profiler/memoized_cost_model.h"

namespace mplan {

MemoizedCostModel::MemoizedCostModel(const CostModel& source, const Tdfg& tdfg)
    : ForwardingCostModel(source), tdfg_(tdfg), options_(tdfg.tasks.size()), recompute_ms_(tdfg.tasks.size()) {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    from_saved_.push_back(recomputes_from_saved(tdfg, t));
}

std::vector<TaskOption> MemoizedCostModel::options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  if (&tdfg != &tdfg_ || t < 0 || static_cast<size_t>(t) >= options_.size())
    return source_.options(tdfg, t, sub_batch);
  auto& of_task = options_[static_cast<size_t>(t)];
  auto it = of_task.find(sub_batch);
  if (it == of_task.end()) it = of_task.emplace(sub_batch, source_.options(tdfg, t, sub_batch)).first;
  return it->second;
}

double MemoizedCostModel::recompute_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch,
                                       const TaskOption& first_run) const {
  if (&tdfg != &tdfg_ || t < 0 || static_cast<size_t>(t) >= options_.size())
    return source_.recompute_ms(tdfg, t, sub_batch, first_run);
  if (!from_saved_[static_cast<size_t>(t)]) return first_run.time_ms;
  auto& of_task = recompute_ms_[static_cast<size_t>(t)];
  auto it = of_task.find(sub_batch);
  if (it == of_task.end()) it = of_task.emplace(sub_batch, source_.recompute_ms(tdfg, t, sub_batch, first_run)).first;
  return it->second;
}

}  // namespace mplan
