#include "planner/microbatch/benchmark_table.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mplan::microbatch {

const MicroBatchBenchmark* BenchmarkTable::find(int64_t micro_batch) const {
  auto it = std::lower_bound(rows.begin(), rows.end(), micro_batch,
                             [](const MicroBatchBenchmark& row, int64_t b) { return row.micro_batch < b; });
  return it != rows.end() && it->micro_batch == micro_batch ? &*it : nullptr;
}

std::vector<const MicroBatchBenchmark*> rows_for_policy(const BenchmarkTable& table,
                                                        BatchSizePolicy policy, int64_t batch) {
  std::vector<const MicroBatchBenchmark*> rows;
  for (int64_t b : micro_batch_sizes(policy, batch)) {
    const MicroBatchBenchmark* row = table.find(b);
    MPLAN_CHECK(row != nullptr, "kernel " + table.kernel + ": benchmark table has no micro-batch " +
                                    std::to_string(b) + ", which policy " +
                                    batch_size_policy_name(policy) + " needs");
    rows.push_back(row);
  }
  return rows;
}

BenchmarkTable make_benchmark_table(std::string kernel, const BenchmarkFn& benchmark,
                                    std::vector<int64_t> micro_batches) {
  std::sort(micro_batches.begin(), micro_batches.end());
  micro_batches.erase(std::unique(micro_batches.begin(), micro_batches.end()), micro_batches.end());
  BenchmarkTable table;
  table.kernel = std::move(kernel);
  for (int64_t b : micro_batches) {
    MPLAN_CHECK(b >= 1, "kernel " + table.kernel + ": micro-batch sizes must be at least 1");
    MicroBatchBenchmark row{b, benchmark(b)};
    MPLAN_CHECK(!row.options.empty(),
                "kernel " + table.kernel + ": no algorithm at micro-batch " + std::to_string(b));
    for (const TaskOption& o : row.options) {
      MPLAN_CHECK(std::isfinite(o.time_ms) && o.time_ms >= 0,
                  "kernel " + table.kernel + ": algorithm " + o.algorithm + " has a bad time");
      MPLAN_CHECK(o.workspace_bytes >= 0,
                  "kernel " + table.kernel + ": algorithm " + o.algorithm + " has a negative workspace");
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

BenchmarkTable table_from_cost_model(const CostModel& model, const Tdfg& tdfg, TaskId t,
                                     const std::vector<int64_t>& micro_batches) {
  MPLAN_CHECK(t >= 0 && t < static_cast<TaskId>(tdfg.tasks.size()), "task id out of range");
  return make_benchmark_table(
      kernel_name(tdfg, t), [&](int64_t b) { return model.options(tdfg, t, b); }, micro_batches);
}

std::string kernel_name(const Tdfg& tdfg, TaskId t) {
  MPLAN_CHECK(t >= 0 && t < static_cast<TaskId>(tdfg.tasks.size()), "task id out of range");
  const Task& task = tdfg.tasks[t];
  std::string layer = task.name;
  if (task.layer >= 0 && task.layer < static_cast<LayerId>(tdfg.layer_names.size()))
    layer = tdfg.layer_names[task.layer];
  switch (task.kind) {
    case TaskKind::FP: return layer + ".fwd";
    case TaskKind::BP1: return layer + ".bwd_data";
    case TaskKind::BP2: return layer + ".bwd_filter";
    case TaskKind::update: return layer;
  }
  return layer;
}

std::vector<TaskId> convolution_kernels(const Tdfg& tdfg) {
  std::vector<TaskId> kernels;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    if (tdfg.tasks[t].has_algorithms) kernels.push_back(t);
  return kernels;
}

}  // namespace mplan::microbatch
