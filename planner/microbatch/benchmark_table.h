#pragma once
// The benchmark table of one convolution kernel: for each candidate
// micro-batch size, every algorithm with its time and workspace at that size
// (mu-cuDNN §III-B, step 1 of WR). The optimizers read only this table, so
// measuring (a CostModel, a recorded profile, a test's random numbers) stays
// separate from solving (docs/style.md, "measuring is separate from solving").

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/microbatch/batch_size_policy.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan::microbatch {

// Every algorithm of a kernel at one micro-batch size.
struct MicroBatchBenchmark {
  int64_t micro_batch = 0;
  std::vector<TaskOption> options;  // (algorithm, time_ms, workspace_bytes)
};

struct BenchmarkTable {
  std::string kernel;                      // "conv2.fwd": names ILP rows and errors
  std::vector<MicroBatchBenchmark> rows;   // ascending micro_batch, no duplicates

  // The row of a micro-batch size, or nullptr when it was not benchmarked.
  const MicroBatchBenchmark* find(int64_t micro_batch) const;
};

// The rows a policy allows for a kernel of batch `batch`: the policy's sizes
// (micro_batch_sizes), ascending. Aborts when the table lacks one of them: a
// table must be built with the sizes of the policy it is solved for.
std::vector<const MicroBatchBenchmark*> rows_for_policy(const BenchmarkTable& table,
                                                        BatchSizePolicy policy, int64_t batch);

// Whatever supplies a kernel's options at a micro-batch size.
using BenchmarkFn = std::function<std::vector<TaskOption>(int64_t micro_batch)>;

// Calls `benchmark` once for each size (deduplicated, sorted). Aborts on an
// empty option list, a negative or non-finite time or a negative workspace:
// suppliers promise well-formed options (profiler/cost_model.h).
BenchmarkTable make_benchmark_table(std::string kernel, const BenchmarkFn& benchmark,
                                    std::vector<int64_t> micro_batches);

// The table of conv task t from a cost model: CostModel::options(tdfg, t, b)
// for each size b.
BenchmarkTable table_from_cost_model(const CostModel& model, const Tdfg& tdfg, TaskId t,
                                     const std::vector<int64_t>& micro_batches);

// "conv2.fwd", "conv2.bwd_data", "conv2.bwd_filter" for FP, BP1, BP2 of layer conv2.
std::string kernel_name(const Tdfg& tdfg, TaskId t);

// The tasks that choose an algorithm (Task::has_algorithms), in execution order:
// the kernels micro-batching applies to.
std::vector<TaskId> convolution_kernels(const Tdfg& tdfg);

}  // namespace mplan::microbatch
