// The measured CPU cost model: times the CPU runtime's ops and convolution
// algorithms (runtime/cpu/*) per task shape and sub-batch.

#include "profiler/cpu_measured.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>

#include <unistd.h>

#include "profiler/kernel_jobs.h"
#include "profiler/task_invocation.h"
#include "runtime/ops.h"

namespace mplan {
namespace {

using Clock = std::chrono::steady_clock;

// Median of up to `repeats` timed runs after one warm-up, in ms.
double time_ms(const std::function<void()>& run, const CpuMeasureOptions& options) {
  run();  // warm-up: first touch of the buffers, OpenBLAS threads
  std::vector<double> times;
  double total = 0;
  for (int i = 0; i < std::max(1, options.repeats); ++i) {
    auto start = Clock::now();
    run();
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    times.push_back(ms);
    total += ms;
    if (total > options.max_ms_per_measurement) break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int64_t buffer_limit_bytes(const CpuMeasureOptions& options) {
  if (options.max_buffer_bytes > 0) return options.max_buffer_bytes;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{4} << 30;
  return static_cast<int64_t>(pages) / 2 * page;
}

// Slots filled with small random values (so that max-pool and relu take
// their real branches), labels with class 0; sized by the invocation. Their
// total (workspace included) is checked against the limit before anything is
// allocated: a task too large to measure is refused, not measured into an
// out-of-memory crash.
struct Slots {
  std::vector<std::vector<float>> storage;
  std::vector<void*> pointers;

  Slots(const TaskInvocation& task, const CpuMeasureOptions& options) {
    const int64_t limit_bytes = buffer_limit_bytes(options);
    int64_t total_bytes = 0;
    for (int64_t bytes : task.slot_bytes) {
      const int64_t b = std::max<int64_t>(bytes, 4);
      if (bytes < 0 || b > limit_bytes - total_bytes)
        throw MeasurementTooLarge(fmt::format("measuring it needs more than {} bytes of buffers, more than the {} "
                                              "bytes the CPU profiler allows (half of this machine's memory)",
                                              bytes < 0 ? limit_bytes : total_bytes + b, limit_bytes));
      total_bytes += b;
    }
    std::mt19937 random(12345);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    // A 16-bit task's slots hold 16-bit values: floats cut to bfloat16 are
    // also two finite, normal 16-bit patterns of either type (0 and one of
    // magnitude below 2), never a NaN or a subnormal that would time a slow path.
    bool sixteen_bit = false;
    for (const TensorRef& ref : task.invocation.tensors) sixteen_bit |= ref.role == TensorRole::cast_scratch;
    const auto value = [&] {
      float v = uniform(random);
      if (!sixteen_bit) return v;
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      bits &= 0xffff0000u;
      std::memcpy(&v, &bits, sizeof v);
      return v;
    };
    for (size_t i = 0; i < task.slot_bytes.size(); ++i) {
      storage.emplace_back(static_cast<size_t>(std::max<int64_t>(task.slot_bytes[i], 4) + 3) / 4);
      const TensorRole role = task.invocation.tensors[i].role;
      if (role == TensorRole::labels) continue;  // zeros: class 0
      if (role == TensorRole::saved) {
        for (float& v : storage.back()) v = 0.5f + 0.5f * std::abs(value());  // a positive invstd
        continue;
      }
      for (float& v : storage.back()) v = value();
    }
    for (auto& buffer : storage) pointers.push_back(buffer.data());
  }
};

// Times the task's kernels as the generated program calls them.
double time_invocation(const TaskInvocation& task, const CpuMeasureOptions& options) {
  Slots slots(task, options);
  rt::Bindings bindings;
  bindings.slots = slots.pointers.data();
  bindings.slot_count = static_cast<int32_t>(slots.pointers.size());
  bindings.lr = 1e-6f;
  bindings.first_update = false;
  const rt::Context inline_context;  // no stream: runs at once on this thread
  return time_ms(
      [&] {
        for (const rt::KernelCall& call : task.invocation.calls) rt::run_kernel(inline_context, call, bindings);
      },
      options);
}

}  // namespace

std::vector<TaskOption> measure_cpu_task(const TaskShape& shape, int64_t sub_batch, const CpuMeasureOptions& options) {
  const int64_t n = shape.kind == TaskKind::update ? 1 : sub_batch;
  TaskInvocation task = invoke_task_shape(shape, n, 0, 0);
  const std::optional<AlgorithmCall> conv = algorithm_call(task.invocation);
  if (!conv) {
    // One way to run it, with the op table's scratch as its workspace.
    int64_t scratch = 0;
    for (size_t i = 0; i < task.slot_bytes.size(); ++i)
      if (task.invocation.tensors[i].role == TensorRole::workspace) scratch = task.slot_bytes[i];
    return {{"default", time_invocation(task, options), scratch}};
  }
  // Every algorithm of the CPU runtime that supports the direction and shape,
  // each with its own workspace.
  std::vector<TaskOption> result;
  const rt::Context inline_context;
  for (rt::ConvAlgoId algo = 0; algo < rt::conv_algorithm_count(conv->direction); ++algo) {
    const int64_t workspace = rt::conv_workspace_bytes(inline_context, conv->direction, conv->shape, algo);
    if (workspace < 0) continue;
    task = invoke_task_shape(shape, n, algo, workspace);
    result.push_back(
        {rt::conv_algorithm_name(conv->direction, algo), time_invocation(task, options), workspace});
  }
  std::sort(result.begin(), result.end(),
            [](const TaskOption& a, const TaskOption& b) { return a.time_ms < b.time_ms; });
  return result;
}

CpuMeasuredCostModel::CpuMeasuredCostModel(CpuMeasureOptions options) : options_(options) {}

std::vector<TaskOption> CpuMeasuredCostModel::options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  const int32_t key = keys_.key(tdfg, t);
  const TaskShape& shape = keys_.shape(key);
  // The update does not depend on the sub-batch: one measurement.
  const std::string cache_key =
      task_signature(shape) + "@" + std::to_string(shape.kind == TaskKind::update ? 0 : sub_batch);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(cache_key);
  if (it != cache_.end()) return it->second;
  ++measurements_;
  try {
    return cache_[cache_key] = measure_cpu_task(shape, sub_batch, options_);
  } catch (const MeasurementTooLarge& e) {
    throw MeasurementTooLarge(fmt::format("task {} at sub-batch {}: {}", tdfg.tasks.at(t).name, sub_batch, e.what()));
  }
}

std::optional<double> CpuMeasuredCostModel::recompute_from_saved_ms(const Tdfg& tdfg, TaskId t,
                                                                    int64_t sub_batch) const {
  const TaskShape& shape = keys_.shape(keys_.key(tdfg, t));
  const std::string cache_key = recompute_job_key(shape, sub_batch);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(cache_key);
  if (it != cache_.end()) return it->second.front().time_ms;
  ++measurements_;
  try {
    const double ms = time_invocation(invoke_recomputation(shape, sub_batch), options_);
    cache_[cache_key] = {{"default", ms, 0}};
    return ms;
  } catch (const MeasurementTooLarge& e) {
    throw MeasurementTooLarge(
        fmt::format("recomputing task {} at sub-batch {}: {}", tdfg.tasks.at(t).name, sub_batch, e.what()));
  }
}

void CpuMeasuredCostModel::measure_copies() const {
  if (copies_measured_) return;
  // A line through a 64 KiB and a 16 MiB memcpy.
  const int64_t small = 64 << 10, large = 16 << 20;
  std::vector<char> src(large, 1), dst(large, 0);
  double small_ms = time_ms([&] { std::memcpy(dst.data(), src.data(), small); }, options_);
  double large_ms = time_ms([&] { std::memcpy(dst.data(), src.data(), large); }, options_);
  copy_bytes_per_ms_ = std::max(1.0, static_cast<double>(large - small) / std::max(large_ms - small_ms, 1e-6));
  copy_latency_ms_ = std::max(0.0, small_ms - small / copy_bytes_per_ms_);
  copies_measured_ = true;
}

double CpuMeasuredCostModel::host_to_device_ms(int64_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  measure_copies();
  return bytes <= 0 ? 0.0 : copy_latency_ms_ + static_cast<double>(bytes) / copy_bytes_per_ms_;
}

std::string CpuMeasuredCostModel::describe() const {
  return fmt::format("measured (cpu, median of {} runs)", options_.repeats);
}

int CpuMeasuredCostModel::measurements() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return measurements_;
}

}  // namespace mplan
