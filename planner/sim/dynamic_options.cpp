#include "planner/sim/dynamic_options.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"

namespace mplan {

TaskOptionSet dynamic_option_set(const Tdfg& tdfg, const CostModel& cost, TaskId t, int64_t b) {
  std::vector<TaskOption> o = cost.options(tdfg, t, b);
  MPLAN_CHECK(!o.empty(), "cost model gave no option for " + tdfg.tasks[t].name);
  std::vector<std::vector<MicroBatch>> micro(o.size());
  if (!tdfg.tasks[t].has_algorithms || b <= 1) return TaskOptionSet{std::move(o), std::move(micro)};
  // mu-cuDNN §III-C1: the desirable set (Pareto front in time and
  // workspace) of the task's configurations; the undivided ones stay.
  using namespace microbatch;
  const BenchmarkTable table =
      table_from_cost_model(cost, tdfg, t, micro_batch_sizes(BatchSizePolicy::power_of_two, b));
  for (const Configuration& c : desirable_configurations(table, b, BatchSizePolicy::power_of_two)) {
    if (c.micro_batch_count() < 2) continue;
    o.push_back(TaskOption{c.micro.front().algorithm, c.time_ms(), c.workspace_bytes()});
    std::vector<MicroBatch> list;
    for (const MicroConfiguration& m : c.micro)
      list.push_back(MicroBatch{m.micro_batch, m.algorithm, m.time_ms, m.workspace_bytes});
    micro.push_back(std::move(list));
  }
  std::vector<size_t> order(o.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    return std::make_tuple(o[a].time_ms, o[a].workspace_bytes) < std::make_tuple(o[c].time_ms, o[c].workspace_bytes);
  });
  TaskOptionSet set;
  for (size_t i : order) {
    set.options.push_back(o[i]);
    set.micro.push_back(std::move(micro[i]));
  }
  return set;
}

const TaskOptionSet& DynamicOptionCache::at(const Tdfg& tdfg, const CostModel& cost, TaskId t, int64_t b) {
  auto it = sets_.find({t, b});
  if (it == sets_.end()) it = sets_.emplace(std::make_pair(t, b), dynamic_option_set(tdfg, cost, t, b)).first;
  return it->second;
}

}  // namespace mplan
