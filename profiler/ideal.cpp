#include "profiler/ideal.h"

#include <algorithm>

#include "tdfg/bounds.h"

namespace mplan {

IdealRun ideal_run(const Tdfg& tdfg, const CostModel& model, int64_t batch) {
  MPLAN_CHECK(tdfg.model != nullptr, "ideal_run: the TDFG has no model");
  IdealRun run;
  run.batch = batch > 0 ? batch : tdfg.model->batch;
  std::vector<int64_t> workspaces;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    TaskOption fastest = fastest_option(model, tdfg, t, run.batch);
    run.time_ms += fastest.time_ms;
    run.workspace_bytes = std::max(run.workspace_bytes, fastest.workspace_bytes);
    workspaces.push_back(fastest.workspace_bytes);
    run.choices.push_back(std::move(fastest));
  }
  // Blocks live from their first writer to their last reader (tdfg/bounds.h),
  // with each task's workspace added while it runs.
  const std::vector<int64_t> live = liveness_profile(tdfg, run.batch, workspaces);
  for (size_t i = 0; i < live.size(); ++i)
    if (live[i] > run.peak_bytes) {
      run.peak_bytes = live[i];
      run.peak_task = static_cast<TaskId>(i);
    }
  return run;
}

}  // namespace mplan
