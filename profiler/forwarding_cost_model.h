#pragma once
// A cost model that answers every question with another's: the base of a
// model that changes some answers and keeps the rest (MemoizedCostModel;
// the data-parallel plan's shared host link, planner/data_parallel).

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/cost_model.h"

namespace mplan {

class ForwardingCostModel : public CostModel {
 public:
  // `source` must outlive this model.
  explicit ForwardingCostModel(const CostModel& source) : source_(source) {}

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    return source_.options(tdfg, t, sub_batch);
  }
  double recompute_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch, const TaskOption& first_run) const override {
    return source_.recompute_ms(tdfg, t, sub_batch, first_run);
  }
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    return source_.recompute_from_saved_ms(tdfg, t, sub_batch);
  }
  double host_to_device_ms(int64_t bytes) const override { return source_.host_to_device_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return source_.device_to_host_ms(bytes); }
  int copy_engines() const override { return source_.copy_engines(); }
  double duplex_slowdown() const override { return source_.duplex_slowdown(); }
  int64_t device_memory_bytes() const override { return source_.device_memory_bytes(); }
  std::string describe() const override { return source_.describe(); }
  CostModelInfo info() const override { return source_.info(); }
  bool measures_when_asked() const override { return source_.measures_when_asked(); }

 protected:
  const CostModel& source_;
};

}  // namespace mplan
