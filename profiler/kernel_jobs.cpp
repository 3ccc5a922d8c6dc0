#include "profiler/kernel_jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "profiler/task_invocation.h"

namespace mplan {
namespace {

// A cost model that answers from a kernel profiler's results (for make_profile).
class ResultsCostModel final : public CostModel {
 public:
  ResultsCostModel(std::map<std::string, std::vector<TaskOption>> options, TransferLine h2d, TransferLine d2h,
                   double duplex_slowdown, int64_t memory_bytes, std::string describe, std::string math)
      : options_(std::move(options)),
        h2d_(h2d),
        d2h_(d2h),
        duplex_slowdown_(duplex_slowdown),
        memory_bytes_(memory_bytes),
        describe_(std::move(describe)),
        math_(std::move(math)) {}

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    auto it = options_.find(job_key(describe_task(tdfg, t), sub_batch));
    MPLAN_CHECK(it != options_.end(), "merge_results: a task without a result (checked before)");
    return it->second;
  }
  // Results from a job file without recomputation jobs have none.
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    auto it = options_.find(recompute_job_key(describe_task(tdfg, t), sub_batch));
    if (it == options_.end()) return std::nullopt;
    return it->second.front().time_ms;
  }
  double host_to_device_ms(int64_t bytes) const override { return h2d_.time_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return d2h_.time_ms(bytes); }
  int copy_engines() const override { return 2; }
  double duplex_slowdown() const override { return duplex_slowdown_; }
  int64_t device_memory_bytes() const override { return memory_bytes_; }
  std::string describe() const override { return describe_; }
  // The math the kernel profiler ran cuDNN and cuBLAS in: the job file's
  // (runtime/cuda/device.cpp set_math_mode), fp32 on the CPU backend.
  CostModelInfo info() const override { return CostModelInfo{"measured", math_, ""}; }

 private:
  std::map<std::string, std::vector<TaskOption>> options_;
  TransferLine h2d_, d2h_;
  double duplex_slowdown_;
  int64_t memory_bytes_;
  std::string describe_;
  std::string math_;
};

// Least squares of time = latency + bytes / bandwidth over the timed copies.
Result<TransferLine> fit_copies(const std::vector<rt::CopyTiming>& copies, bool host_to_device, const std::string& file) {
  if (copies.size() < 2)
    return Error{{file, 0, 0}, "needs copy timings of at least two sizes (the job file's copy_sizes)"};
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const rt::CopyTiming& c : copies) {
    const double x = static_cast<double>(c.bytes), y = host_to_device ? c.host_to_device_ms : c.device_to_host_ms;
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);  // ms per byte
  if (!(slope > 0))
    return Error{{file, 0, 0}, fmt::format("the {} copy times do not grow with the size: not a measurement",
                                           host_to_device ? "host-to-device" : "device-to-host")};
  TransferLine line;
  line.bytes_per_s = 1000.0 / slope;
  line.latency_ms = std::max(0.0, (sy - slope * sx) / n);
  return line;
}

rt::Job make_job(const std::string& key, const TaskInvocation& task) {
  rt::Job job;
  job.key = key;
  job.slot_bytes = task.slot_bytes;
  for (const TensorRef& ref : task.invocation.tensors) job.slot_roles.push_back(tensor_role_name(ref.role));
  job.calls = task.invocation.calls;
  return job;
}

}  // namespace

std::string job_key(const TaskShape& shape, int64_t sub_batch) {
  return task_signature(shape) + "@" + std::to_string(shape.kind == TaskKind::update ? 0 : sub_batch);
}

std::string recompute_job_key(const TaskShape& shape, int64_t sub_batch) {
  return layer_signature(shape) + " " + kRecomputeKind + "@" + std::to_string(sub_batch);
}

rt::JobFile make_jobs(const Tdfg& tdfg, const std::vector<int64_t>& sub_batches, int32_t repeats, int32_t warmup,
                      bool sixteen_bit_kernels) {
  rt::JobFile jobs;
  jobs.model = tdfg.model->name;
  // The kernels run in the model's math: tf32 where it asks for it, a 16-bit
  // model's bf16 or fp16, else fp32 (a model's "default" is measured in fp32,
  // the kernel profiler's own).
  const std::string& math = tdfg.model->math;
  jobs.math = math == "tf32" || math == "bf16" || math == "fp16" ? math : "fp32";
  jobs.repeats = repeats;
  jobs.warmup = warmup;
  for (int64_t bytes = int64_t{64} << 10; bytes <= int64_t{256} << 20; bytes *= 4) jobs.copy_sizes.push_back(bytes);
  std::set<std::string> seen;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    for (int64_t b : sub_batches) {
      const std::string key = job_key(shape, b);
      if (!seen.insert(key).second) continue;
      const TaskInvocation task =
          invoke_task_shape(shape, shape.kind == TaskKind::update ? 1 : b, 0, 0, sixteen_bit_kernels);
      jobs.jobs.push_back(make_job(key, task));
      // Its recomputation from saved state: other kernels, timed apart.
      if (recomputes_from_saved(tdfg, t))
        jobs.jobs.push_back(make_job(recompute_job_key(shape, b), invoke_recomputation(shape, b, sixteen_bit_kernels)));
    }
  }
  return jobs;
}

Result<Profile> merge_results(const Tdfg& tdfg, const rt::ResultFile& results, const std::vector<int64_t>& sub_batches,
                              const std::string& file) {
  std::map<std::string, std::vector<TaskOption>> options;
  for (const rt::JobResult& r : results.results) {
    if (!r.error.empty()) continue;
    std::vector<TaskOption> list;
    for (const rt::JobOption& o : r.options) list.push_back({o.algorithm, o.time_ms, o.workspace_bytes});
    std::stable_sort(list.begin(), list.end(), [](const TaskOption& a, const TaskOption& b) { return a.time_ms < b.time_ms; });
    if (!list.empty()) options[r.key] = std::move(list);
  }
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    for (int64_t b : sub_batches) {
      const std::string key = job_key(shape, b);
      if (options.count(key)) continue;
      std::string why = "no result";
      for (const rt::JobResult& r : results.results)
        if (r.key == key && !r.error.empty()) why = "the profiler failed: " + r.error;
      return Error{{file, 0, 0}, fmt::format("{} at sub-batch {}: {} (key '{}'); the results were made from "
                                             "another job file, or the profiler stopped early",
                                             tdfg.tasks[t].name, b, why, key)};
    }
  }
  Result<TransferLine> h2d = fit_copies(results.copies, true, file);
  if (!h2d) return h2d.error();
  Result<TransferLine> d2h = fit_copies(results.copies, false, file);
  if (!d2h) return d2h.error();
  if (tdfg.model->math != "default" && tdfg.model->math != results.math)
    return Error{{file, 0, 0}, fmt::format("the kernels were timed in {} math, but the model asks for {}: "
                                           "profile it again from a job file of this model",
                                           results.math, tdfg.model->math)};
  const rt::BackendInfo& b = results.backend;
  std::string describe = fmt::format("measured ({}, {}", b.backend, b.device);
  for (const std::string& part : {b.driver.empty() ? "" : "driver " + b.driver,
                                  b.runtime.empty() ? "" : "runtime " + b.runtime, b.libraries})
    if (!part.empty()) describe += ", " + part;
  // The largest copy timed both ways at once: what a copy had with the other
  // direction running beside it. The transfer lines are each direction alone;
  // the slowdown is the both-ways time over the slower direction's alone, at
  // least 1 (docs/profile-format.md), and the simulation applies it where
  // copies of the two directions overlap (planner/streams.h).
  const rt::CopyTiming* both = nullptr;
  for (const rt::CopyTiming& c : results.copies)
    if (c.both_directions_ms > 0 && (both == nullptr || c.bytes > both->bytes)) both = &c;
  double duplex_slowdown = 1.0;
  if (both != nullptr) {
    duplex_slowdown = std::clamp(both->both_directions_ms / std::max(both->host_to_device_ms, both->device_to_host_ms),
                                 1.0, kMaxDuplexSlowdown);
    const double bytes = static_cast<double>(both->bytes);
    const std::string size = both->bytes >= (1 << 20) ? fmt::format("{:.0f} MiB", bytes / (1 << 20))
                                                      : fmt::format("{:.0f} KiB", bytes / 1024);
    describe += fmt::format(", copies of {}: h2d {:.1f} and d2h {:.1f} GB/s alone, {:.1f} GB/s each both ways at "
                            "once (duplex slowdown {:.2f})",
                            size, bytes / (both->host_to_device_ms * 1e6), bytes / (both->device_to_host_ms * 1e6),
                            bytes / (both->both_directions_ms * 1e6), duplex_slowdown);
  }
  describe += fmt::format(", median of {} runs)", results.repeats);
  const ResultsCostModel cost(std::move(options), *h2d, *d2h, duplex_slowdown, b.memory_bytes, describe, results.math);
  return make_profile(tdfg, cost, sub_batches, b.device);
}

}  // namespace mplan
