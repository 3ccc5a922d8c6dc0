#pragma once
// The measured CPU cost model (docs/design.md, Profiler: "measured, CPU"): the
// same interface as the CUDA one over the CPU runtime's real algorithms, so
// the whole pipeline runs, measured, on a machine without a GPU. Every task
// is timed by calling the runtime's own op (runtime/ops.h, runtime/conv.h) on
// buffers of the task's shapes; conv tasks are timed with every algorithm that
// supports the direction and shape, each with its real workspace.
//
// Measuring is lazy and cached by task signature and sub-batch (identical
// layers are timed once, profiler/signature.h); each time is the median of
// `repeats` runs after one warm-up. `mplan profile --backend cpu` writes the
// result as profile.json through make_profile (profiler/profile.h).

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/cost_model.h"
#include "profiler/signature.h"

namespace mplan {

struct CpuMeasureOptions {
  int repeats = 3;              // timed runs per measurement (median); at least 1
  // A measurement stops repeating once its runs took this long in all.
  double max_ms_per_measurement = 200.0;
  int copy_engines = 2;         // the CPU runtime has one copy thread per direction
  int64_t device_memory_bytes = int64_t{8} << 30;  // what a plan may assume the "device" has
  // The most bytes of buffers one measurement may allocate; 0: half of this
  // machine's memory. A task beyond it is refused (MeasurementTooLarge), not
  // measured into an out-of-memory crash.
  int64_t max_buffer_bytes = 0;
};

// Thrown when measuring a task would allocate more than max_buffer_bytes;
// what() names the task (when known), the bytes and the limit.
struct MeasurementTooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CpuMeasuredCostModel final : public CostModel {
 public:
  explicit CpuMeasuredCostModel(CpuMeasureOptions options = {});

  bool measures_when_asked() const override { return true; }
  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  // Times the recomputation's own kernels (invoke_recomputation).
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  // memcpy between two host buffers: the CPU backend's copies (a line fitted
  // from a small and a large copy, measured once).
  double host_to_device_ms(int64_t bytes) const override;
  double device_to_host_ms(int64_t bytes) const override { return host_to_device_ms(bytes); }
  int copy_engines() const override { return options_.copy_engines; }
  int64_t device_memory_bytes() const override { return options_.device_memory_bytes; }
  std::string describe() const override;
  CostModelInfo info() const override { return CostModelInfo{"measured", "fp32", ""}; }

  // Measurements made so far (for tests: identical layers are timed once).
  int measurements() const;

 private:
  void measure_copies() const;

  CpuMeasureOptions options_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<TaskOption>> cache_;  // task signature @ sub-batch
  mutable TaskKeyCache keys_;
  mutable bool copies_measured_ = false;
  mutable double copy_latency_ms_ = 0, copy_bytes_per_ms_ = 1;
  mutable int measurements_ = 0;
};

// The timings of one task shape at sub-batch n, fastest first (exposed for tests).
std::vector<TaskOption> measure_cpu_task(const TaskShape& shape, int64_t sub_batch, const CpuMeasureOptions& options);

}  // namespace mplan
