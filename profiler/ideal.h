#pragma once
// moDNN's "ideal case" (moDNN §V-B): unlimited memory, the whole
// batch as one sub-batch, every task with its fastest algorithm, no copies.
// Its time is the bound every plan is compared with; its memory is what a
// GPU needs to run it without any of mplan's levers.

#include <cstdint>
#include <vector>

#include "profiler/cost_model.h"

namespace mplan {

struct IdealRun {
  int64_t batch = 0;
  double time_ms = 0;                  // sum over tasks of the fastest option's time at the batch
  int64_t peak_bytes = 0;              // liveness peak with those options' workspaces (incl. resident blocks)
  TaskId peak_task = kNoTask;          // the task during which the peak occurs
  int64_t workspace_bytes = 0;         // the largest single workspace of those options
  std::vector<TaskOption> choices;     // per task: the fastest option
};

// The ideal run of a TDFG at `batch` (the model's batch when 0).
IdealRun ideal_run(const Tdfg& tdfg, const CostModel& model, int64_t batch = 0);

}  // namespace mplan
