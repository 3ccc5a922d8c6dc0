#include "profiler/memoized_cost_model.h"

namespace mplan {

MemoizedCostModel::MemoizedCostModel(const CostModel& source, const Tdfg& tdfg)
    : ForwardingCostModel(source), tdfg_(tdfg), options_(tdfg.tasks.size()) {}

std::vector<TaskOption> MemoizedCostModel::options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  if (&tdfg != &tdfg_ || t < 0 || static_cast<size_t>(t) >= options_.size())
    return source_.options(tdfg, t, sub_batch);
  auto& of_task = options_[static_cast<size_t>(t)];
  auto it = of_task.find(sub_batch);
  if (it == of_task.end()) it = of_task.emplace(sub_batch, source_.options(tdfg, t, sub_batch)).first;
  return it->second;
}

}  // namespace mplan
