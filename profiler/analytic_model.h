#pragma once
// The analytic cost model (docs/design.md, Profiler): a device file and
// per-algorithm models of time and workspace that follow cuDNN's algorithms.
// Used for planning for a GPU the user does not have, for tests, and when no
// GPU is present. docs/cost-model.md describes the model and its blind spots.

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "profiler/cost_model.h"
#include "profiler/device.h"
#include "profiler/kernel_work.h"
#include "profiler/math_mode.h"
#include "profiler/signature.h"

namespace mplan {

// Every option of a task of this shape at sub-batch b, fastest first (ties:
// less workspace first). Conv tasks: one per algorithm cuDNN supports for the
// shape; other tasks: one, "default". The update ignores b (once per iteration).
// Convolutions and GEMMs run in `math` (the device's default math mode when
// not given; profiler/math_mode.h). The times are on a busy stream, as the
// generated program runs them (kernel_work.h, StreamState), unless `stream`
// says idle (as the kernel profiler times them).
std::vector<TaskOption> analytic_options(const Device& device, const TaskShape& shape, int64_t sub_batch);
std::vector<TaskOption> analytic_options(const Device& device, const TaskShape& shape, int64_t sub_batch,
                                         MathMode math, StreamState stream = StreamState::busy);

// The kernels of a task that is not a convolution: the op table's estimate
// (memory-bound ops by bytes moved, linear layers as cuBLAS GEMMs;
// docs/design.md), and the update's (one SGD kernel per weighted layer).
// With `recompute`, an FP task's recomputation (OpTask::recompute).
std::vector<KernelWork> task_work(const TaskShape& shape, int64_t sub_batch, bool recompute = false);

// A task that casts weights into a 16-bit copy where it uses them
// (TaskShape::copied_parameters on FP or BP1): the cast's kernel (read 4,
// write 2 bytes per parameter; none for other tasks), and its options with
// the cast's time and the copy's bytes (2 per parameter, held through the
// task) added to each one's time and workspace.
std::vector<KernelWork> weight_cast_work(const TaskShape& shape);
std::vector<TaskOption> with_weight_cast(std::vector<TaskOption> options, const TaskShape& shape, double cast_ms);

// Whether the device has the math mode; the error lists the modes it has.
Status check_math_mode(const Device& device, MathMode math);

// The math mode a model asks for (Model::math: "default" is the device's
// default) on a device; an error says what the model asked and what the
// device has.
Result<MathMode> resolve_math_mode(const Device& device, const std::string& model_math);

// Time of one pinned copy of `bytes`: a fixed cost plus bytes over the
// measured bandwidth of the direction.
double analytic_copy_ms(const Device& device, int64_t bytes, bool host_to_device);

class AnalyticCostModel final : public CostModel {
 public:
  // `math`: the mode convolutions and GEMMs run in; the device's default when
  // not given. The device must have it (check_math_mode).
  explicit AnalyticCostModel(Device device, std::optional<MathMode> math = std::nullopt);

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  // The recomputation's own work (task_work with `recompute`).
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  double host_to_device_ms(int64_t bytes) const override { return analytic_copy_ms(device_, bytes, true); }
  double device_to_host_ms(int64_t bytes) const override { return analytic_copy_ms(device_, bytes, false); }
  int copy_engines() const override { return device_.copy_engines; }
  double duplex_slowdown() const override { return device_.copy_duplex_slowdown; }
  int64_t device_memory_bytes() const override { return device_.memory_bytes; }
  std::string describe() const override;
  CostModelInfo info() const override;

  const Device& device() const { return device_; }
  MathMode math_mode() const { return math_; }

 private:
  Device device_;
  MathMode math_;
  TaskKeyCache keys_;
  // (task key, sub-batch) -> options; the planner asks for the same ones many times.
  mutable std::mutex mutex_;
  mutable std::unordered_map<uint64_t, std::vector<TaskOption>> cache_;
};

}  // namespace mplan
