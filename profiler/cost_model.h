#pragma once
// The cost model the planner decides everything from (docs/design.md, Profiler):
// for a task at sub-batch b, its options (algorithm, time, workspace); the
// time of host<->device copies; the device's memory. Implementations: analytic
// (device file), recorded (profile.json), measured CPU (runtime's kernels).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "profiler/signature.h"
#include "tdfg/tdfg.h"

namespace mplan {

// One way to run a task: an algorithm with its time and workspace at a sub-batch.
struct TaskOption {
  std::string algorithm;        // cuDNN's name for conv tasks ("winograd"), "default" otherwise
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

// What kind of cost model answered, so that a plan says whether its times are
// predictions or measurements (docs/plan-format.md, "cost_model").
struct CostModelInfo {
  std::string kind = "unknown";  // "analytic", "recorded" (a profile.json), "measured" (timed now)
  std::string math_mode = "fp32";  // the math mode convolutions and GEMMs were costed in
  std::string expected_error;    // analytic: the calibration's held-out error; "" for measurements
};

// One line for people: "analytic prediction, math tf32; expected error: ..."
// or "measured, math fp32", so that nobody mistakes a prediction for a measurement.
std::string describe_cost_model(const CostModelInfo& info);

// The largest duplex slowdown a profile or device file may give.
inline constexpr double kMaxDuplexSlowdown = 100.0;

class CostModel {
 public:
  virtual ~CostModel() = default;

  // Every supported option of task t at sub-batch b, fastest first; never
  // empty for a task of the TDFG (non-conv tasks have one, "default").
  virtual std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const = 0;

  // Time of task t run again at sub-batch b after a first run with
  // `first_run` (SuperNeurons §3.4 recomputation; Task::recompute_reads and
  // recompute_writes). The same kernel on the same inputs takes the first
  // run's time, except where the op recomputes from what it saved
  // (OpSpec::recompute_from_saved: batch norm normalises with the saved
  // statistics and skips their pass): then the model's own figure
  // (recompute_from_saved_ms), else the first run's time scaled by the ratio
  // of the two runs' memory traffic (the op table's work; these are
  // streaming kernels), as for a compact backward the profile lacks.
  virtual double recompute_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch, const TaskOption& first_run) const;

  // The model's own time of a recomputation from saved state (asked only for
  // tasks where recomputes_from_saved holds); nothing where it has none (a
  // profile from before such times were recorded).
  virtual std::optional<double> recompute_from_saved_ms(const Tdfg&, TaskId, int64_t) const { return std::nullopt; }

  // Time of one copy of `bytes` bytes from pinned host memory to the device,
  // and back.
  virtual double host_to_device_ms(int64_t bytes) const = 0;
  virtual double device_to_host_ms(int64_t bytes) const = 0;

  // Copy engines the device has (1: one shared copy stream, 2: one per direction).
  virtual int copy_engines() const = 0;

  // How much slower a copy runs while the other direction copies too (>= 1;
  // 1: PCIe's full duplex holds). Measured by the kernel profiler
  // (both_directions_ms, docs/profile-format.md) or given by the device file.
  virtual double duplex_slowdown() const { return 1.0; }

  // Memory the device has, in bytes.
  virtual int64_t device_memory_bytes() const = 0;

  // Human-readable: "analytic (K40, examples/devices/k40.yaml)".
  virtual std::string describe() const = 0;

  // Which kind of model this is, its math mode and its expected error.
  virtual CostModelInfo info() const { return CostModelInfo{}; }

  // Whether options() times kernels on this machine when first asked (the
  // CPU backend's measured model): then two plans must not be made at once,
  // or each would time its kernels beside the other's.
  virtual bool measures_when_asked() const { return false; }
};

// The time a streaming kernel takes per byte of device-memory traffic on this
// model: the median, over the forward tasks without an algorithm choice
// (ReLU, batch norm, pooling, add...) that read and write at least
// kStreamingTrafficBytes of non-resident blocks at the sub-batch, of their
// fastest option's time over those bytes (all such tasks where none moves
// that much; 0 where the TDFG has none). An on-device copy of n bytes moves
// 2n (read and write): the planner's compaction prices it so, from the
// model's (or the profile's) own kernels.
inline constexpr double kStreamingTrafficBytes = 1 << 20;
double streaming_ms_per_byte(const CostModel& model, const Tdfg& tdfg, int64_t sub_batch);

// Whether task t's recomputation runs other kernels than its first run: an
// FP task of an op with OpSpec::recompute_from_saved.
bool recomputes_from_saved(const Tdfg& tdfg, TaskId t);

// The ratio of the bytes a recomputation from saved state moves to the bytes
// its first run moves, by the op table's work (1 for other tasks).
double recompute_traffic_ratio(const TaskShape& shape, int64_t sub_batch);

// The fastest option of a task (options(...).front()).
TaskOption fastest_option(const CostModel& model, const Tdfg& tdfg, TaskId t, int64_t sub_batch);
// The option with the least workspace, fastest among equals.
TaskOption leanest_option(const CostModel& model, const Tdfg& tdfg, TaskId t, int64_t sub_batch);

}  // namespace mplan
