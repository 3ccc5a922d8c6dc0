#pragma once
// A cost model that remembers its source's task options for one TDFG. The
// plan search simulates the iteration hundreds of times and asks for every
// task's options in each simulation; a recorded profile answers by the task's
// signature, a string it builds and looks up each time (a tenth of the
// search's time on ResNet-50). Everything else is the source's.
//
// Not thread-safe: one plan at a time (plan_iteration makes one per call).

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "profiler/forwarding_cost_model.h"

namespace mplan {

class MemoizedCostModel final : public ForwardingCostModel {
 public:
  // `source` and `tdfg` must outlive this model; questions about another TDFG
  // go to the source unremembered.
  MemoizedCostModel(const CostModel& source, const Tdfg& tdfg);

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  // Remembered per task and sub-batch: a task that recomputes from saved
  // state has no algorithms, so its one option is the first run's.
  double recompute_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch, const TaskOption& first_run) const override;

 private:
  const Tdfg& tdfg_;
  // Per task: sub-batch -> its options, as the source gave them.
  mutable std::vector<std::unordered_map<int64_t, std::vector<TaskOption>>> options_;
  // Per task: whether it recomputes from saved state; sub-batch -> the
  // source's time of its recomputation.
  std::vector<bool> from_saved_;
  mutable std::vector<std::unordered_map<int64_t, double>> recompute_ms_;
};

}  // namespace mplan
