// Timing of a job file's kernels and copies on the runtime backend this
// program is linked with (profile_jobs.h). Only runtime/device.h, ops.h,
// kernel_call.h and jobs.h: the same code times the CPU and the CUDA backend.

#include "profiler/kernel_profiler/profile_jobs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "profiler/kernel_profiler/call_extents.h"
#include "runtime/device.h"
#include "runtime/kernel_call.h"
#include "runtime/ops.h"
#ifdef MPLAN_KERNEL_PROFILER_CUDA
#include "runtime/cuda/conv.h"
#endif

namespace mplan::kernel_profiler {
namespace {

using Clock = std::chrono::steady_clock;

size_t round_up(int64_t bytes) {
  const size_t b = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  return (b + rt::kDeviceAlignmentBytes - 1) / rt::kDeviceAlignmentBytes * rt::kDeviceAlignmentBytes;
}

// Conv algorithms' time that the backend says it did not run as named: on
// CUDA, cuDNN may refuse an algorithm at run time after giving its workspace.
int64_t fallbacks() {
#ifdef MPLAN_KERNEL_PROFILER_CUDA
  return rt::cuda::conv_fallback_count();
#else
  return 0;
#endif
}

// A job's slots in one device allocation, each at a 256-byte boundary, filled
// as their roles say: "labels" zeros (class 0), "saved" positive (an inverse
// standard deviation), anything else uniform in [-1, 1] (so max-pool and relu
// take both branches). A slot is filled by tiling one random pattern of
// kPatternWords values: drawing every value of a VGG-16 job at sub-batch 256
// (three slots of 3.3 GB) one by one took longer than timing all its kernels.
class Slots {
 public:
  static constexpr size_t kPatternWords = size_t{1} << 20;

  bool allocate(const rt::Job& job, int64_t free_bytes, rt::Stream* stream, std::string* error) {
    size_t total = 0;
    for (int64_t bytes : job.slot_bytes) total += round_up(bytes);
    if (free_bytes > 0 && static_cast<int64_t>(total) > free_bytes) {
      *error = "its slots need " + std::to_string(total) + " bytes; the device has " + std::to_string(free_bytes) +
               " free";
      return false;
    }
    memory_ = rt::device_alloc(total, error);
    if (memory_.base == nullptr) return false;
    size_t at = 0;
    for (size_t i = 0; i < job.slot_bytes.size(); ++i) {
      pointers_.push_back(memory_.base + at);
      const std::string& role = job.slot_roles[i];
      const size_t bytes = static_cast<size_t>(job.slot_bytes[i]);
      if (role == "labels")
        rt::fill_u32_async(memory_.base + at, 0, bytes, stream);
      else
        fill(memory_.base + at, bytes, role == "saved" ? positive() : uniform());
      at += round_up(job.slot_bytes[i]);
    }
    rt::stream_synchronize(stream);
    return true;
  }
  ~Slots() { rt::device_free(memory_); }
  std::vector<void*>& pointers() { return pointers_; }

 private:
  // The patterns, drawn once per process from a fixed seed.
  static const std::vector<float>& uniform() {
    static const std::vector<float> values = draw(-1.0f, 1.0f);
    return values;
  }
  static const std::vector<float>& positive() {
    static const std::vector<float> values = draw(0.5f, 1.0f);
    return values;
  }
  static std::vector<float> draw(float low, float high) {
    std::mt19937 random(12345);
    std::uniform_real_distribution<float> distribution(low, high);
    std::vector<float> values(kPatternWords);
    for (float& v : values) v = distribution(random);
    return values;
  }
  // Copies the pattern over `bytes` of device memory, the last copy partial.
  static void fill(std::byte* device, size_t bytes, const std::vector<float>& pattern) {
    const size_t chunk = pattern.size() * sizeof(float);
    for (size_t done = 0; done < bytes; done += chunk)
      rt::copy_to_device(device + done, pattern.data(), std::min(chunk, bytes - done));
  }

  rt::DeviceMemory memory_;
  std::vector<void*> pointers_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The memory overwritten before each timed run (ProfileOptions::flush_bytes);
// empty when caches stay warm. Set for the length of one profile_jobs call.
rt::DeviceMemory flush_memory;

void flush_caches(rt::Stream* stream) {
  if (flush_memory.size_bytes > 0) rt::fill_u32_async(flush_memory.base, 0x3f800000u, flush_memory.size_bytes, stream);
}

// Median time of running `calls` once, over `repeats` timed runs after `warmup` untimed ones.
double time_calls(rt::Stream* stream, const std::vector<rt::KernelCall>& calls, const rt::Bindings& bindings,
                  int32_t warmup, int32_t repeats) {
  const rt::Context ctx{stream};
  rt::Event* start = rt::event_create();
  rt::Event* end = rt::event_create();
  for (int32_t i = 0; i < warmup; ++i)
    for (const rt::KernelCall& call : calls) rt::run_kernel(ctx, call, bindings);
  std::vector<double> times;
  for (int32_t i = 0; i < std::max(repeats, 1); ++i) {
    flush_caches(stream);
    rt::event_record(start, stream);
    for (const rt::KernelCall& call : calls) rt::run_kernel(ctx, call, bindings);
    rt::event_record(end, stream);
    rt::event_synchronize(end);
    times.push_back(rt::event_elapsed_ms(start, end));
  }
  rt::event_destroy(start);
  rt::event_destroy(end);
  return median(times);
}

struct ConvCall {
  size_t index;  // in the job's calls
  int algorithm, workspace, workspace_bytes;  // argument positions (rt::conv_call_arguments)
  rt::ConvDirection direction;
  rt::ConvShape shape;
  int64_t type;  // the storage type of a 16-bit convolution (runtime/ops_sixteen_bit.h); float32 else
};

bool is_16_bit_conv(rt::Kernel kernel) {
  return kernel == rt::Kernel::conv_forward_16 || kernel == rt::Kernel::conv_backward_data_16 ||
         kernel == rt::Kernel::conv_backward_filter_16;
}

// The job's convolutions whose algorithm the profiler varies; false with an
// error when they are of several directions (one algorithm id cannot name one
// algorithm of each).
bool conv_calls(const rt::Job& job, std::vector<ConvCall>* out, std::string* error) {
  for (size_t i = 0; i < job.calls.size(); ++i) {
    ConvCall c{i, -1, -1, -1, rt::ConvDirection::forward, {}, static_cast<int64_t>(rt::StorageType::float32)};
    if (!rt::conv_call_arguments(job.calls[i], &c.algorithm, &c.workspace, &c.workspace_bytes)) continue;
    rt::kernel_conv_direction(job.calls[i].kernel, &c.direction);
    for (const rt::Arg& a : job.calls[i].args)
      if (a.kind == rt::ArgKind::conv_shape) c.shape = a.conv;
    if (is_16_bit_conv(job.calls[i].kernel)) c.type = job.calls[i].args.back().integer;  // the type is last
    if (!out->empty() && out->front().direction != c.direction) {
      *error = "its convolutions go in several directions: one algorithm id cannot be varied over them";
      return false;
    }
    out->push_back(c);
  }
  return true;
}

rt::JobResult profile_job(const rt::Job& job, const rt::JobFile& file, rt::Stream* stream, int64_t free_bytes) {
  rt::JobResult result;
  result.key = job.key;
  if (job.calls.empty()) {  // a task that runs no kernel (runtime/jobs.h)
    result.options.push_back({"default", 0.0, 0});
    return result;
  }
  rt::Bindings bindings;
  bindings.lr = 1e-6f;  // repeated updates barely move the weights
  bindings.first_update = false;
  for (const rt::KernelCall& call : job.calls) {
    const std::string why = check_call_extents(call, job.slot_bytes, bindings);
    if (!why.empty()) {
      result.error = why;
      return result;
    }
  }
  std::vector<ConvCall> convs;
  if (!conv_calls(job, &convs, &result.error)) return result;
  Slots slots;
  if (!slots.allocate(job, free_bytes, stream, &result.error)) return result;
  std::vector<void*> pointers = slots.pointers();
  bindings.slots = pointers.data();
  bindings.slot_count = static_cast<int32_t>(pointers.size());

  if (convs.empty()) {
    int64_t scratch = 0;
    for (size_t i = 0; i < job.slot_roles.size(); ++i)
      if (job.slot_roles[i] == "workspace") scratch += job.slot_bytes[i];
    result.options.push_back({"default", time_calls(stream, job.calls, bindings, file.warmup, file.repeats), scratch});
    return result;
  }

  // Every algorithm of the backend (on CUDA the legacy API's and the graph
  // API's engine configurations, runtime/cuda/conv_graph.h), each with the
  // workspace it asks for, bound to one more slot after the job's own.
  const rt::Context ctx{stream};
  const rt::ConvDirection direction = convs.front().direction;
  std::vector<std::string> skipped;
  for (rt::ConvAlgoId algo : rt::conv_algorithm_ids(direction)) {
    const char* name = rt::conv_algorithm_name(direction, algo);
    std::vector<int64_t> need;
    for (const ConvCall& c : convs)
      need.push_back(c.type == static_cast<int64_t>(rt::StorageType::float32)
                         ? rt::conv_workspace_bytes(ctx, direction, c.shape, algo)
                         : rt::conv_workspace_bytes_16(ctx, direction, c.shape, algo, c.type));
    if (*std::min_element(need.begin(), need.end()) < 0) continue;  // the backend does not run it here
    const int64_t workspace_bytes = *std::max_element(need.begin(), need.end());
    std::string error;
    rt::DeviceMemory workspace;
    if (workspace_bytes > 0) {
      if (free_bytes > 0 && workspace_bytes > free_bytes) error = "needs more workspace than the device has free";
      if (error.empty()) workspace = rt::device_alloc(static_cast<size_t>(workspace_bytes), &error);
      if (workspace.base == nullptr) {
        skipped.push_back(std::string(name) + " (" + std::to_string(workspace_bytes) + " bytes of workspace: " +
                          error + ")");
        continue;
      }
    }
    std::vector<rt::KernelCall> calls = job.calls;
    for (size_t i = 0; i < convs.size(); ++i) {
      std::vector<rt::Arg>& args = calls[convs[i].index].args;
      args[convs[i].algorithm] = rt::Arg::of(static_cast<int64_t>(algo));
      args[convs[i].workspace] = need[i] > 0 ? rt::Arg::tensor(bindings.slot_count) : rt::Arg::null();
      args[convs[i].workspace_bytes] = rt::Arg::of(need[i]);
    }
    std::vector<void*> with_workspace = pointers;
    with_workspace.push_back(workspace.base);
    rt::Bindings b = bindings;
    b.slots = with_workspace.data();
    b.slot_count = static_cast<int32_t>(with_workspace.size());
    const int64_t fallbacks_before = fallbacks();
    const double ms = time_calls(stream, calls, b, file.warmup, file.repeats);
    rt::device_free(workspace);
    if (fallbacks() != fallbacks_before) {
      skipped.push_back(std::string(name) + " (the backend ran another algorithm in its place)");
      continue;
    }
    result.options.push_back({name, ms, workspace_bytes});
  }
  std::sort(result.options.begin(), result.options.end(),
            [](const rt::JobOption& a, const rt::JobOption& b) { return a.time_ms < b.time_ms; });
  if (result.options.empty()) {
    result.error = "no algorithm of the backend ran this convolution";
    for (size_t i = 0; i < skipped.size(); ++i) result.error += (i ? "; " : ": ") + skipped[i];
  }
  return result;
}

// Median milliseconds of one copy of `bytes` in a direction, on the stream.
double time_copy(rt::Stream* stream, void* device, void* host, size_t bytes, bool to_device, int32_t warmup,
                 int32_t repeats) {
  rt::Event* start = rt::event_create();
  rt::Event* end = rt::event_create();
  auto copy = [&] {
    if (to_device)
      rt::copy_to_device_async(device, host, bytes, stream);
    else
      rt::copy_to_host_async(host, device, bytes, stream);
  };
  for (int32_t i = 0; i < warmup; ++i) copy();
  std::vector<double> times;
  for (int32_t i = 0; i < std::max(repeats, 1); ++i) {
    rt::event_record(start, stream);
    copy();
    rt::event_record(end, stream);
    rt::event_synchronize(end);
    times.push_back(rt::event_elapsed_ms(start, end));
  }
  rt::event_destroy(start);
  rt::event_destroy(end);
  return median(times);
}

// Median milliseconds until an h2d of `bytes` (host[0, bytes) -> device[0,
// bytes)) and a d2h of `bytes` (device[bytes, 2 bytes) -> host[bytes, 2
// bytes)), started together on two streams, have both ended.
double time_both_directions(rt::Stream* to_device, rt::Stream* to_host, std::byte* device, std::byte* host,
                            size_t bytes, int32_t warmup, int32_t repeats) {
  rt::Event* start = rt::event_create();
  rt::Event* end_h2d = rt::event_create();
  rt::Event* end_d2h = rt::event_create();
  auto both = [&] {
    rt::event_record(start, to_device);
    rt::stream_wait_event(to_host, start);
    rt::copy_to_device_async(device, host, bytes, to_device);
    rt::copy_to_host_async(host + bytes, device + bytes, bytes, to_host);
    rt::event_record(end_h2d, to_device);
    rt::event_record(end_d2h, to_host);
    rt::event_synchronize(end_h2d);
    rt::event_synchronize(end_d2h);
    return std::max(rt::event_elapsed_ms(start, end_h2d), rt::event_elapsed_ms(start, end_d2h));
  };
  for (int32_t i = 0; i < warmup; ++i) both();
  std::vector<double> times;
  for (int32_t i = 0; i < std::max(repeats, 1); ++i) times.push_back(both());
  rt::event_destroy(start);
  rt::event_destroy(end_h2d);
  rt::event_destroy(end_d2h);
  return median(times);
}

}  // namespace

rt::ResultFile profile_jobs(const rt::JobFile& jobs, const ProfileOptions& options) {
  rt::ResultFile results;
  results.backend = rt::backend_info();
  results.math = rt::math_mode();
  results.repeats = jobs.repeats;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  rt::Stream* stream = rt::stream_create("profile");
  if (options.flush_bytes > 0) {
    std::string error;
    flush_memory = rt::device_alloc(static_cast<size_t>(options.flush_bytes), &error);
    if (flush_memory.size_bytes == 0)
      say("no memory to flush the caches with (" + error + "): caches stay warm");
    else
      say("every timed run starts after " + std::to_string(options.flush_bytes >> 20) +
          " MiB of device memory are overwritten (--cold-cache)");
  }
  const int64_t free_bytes = results.backend.free_memory_bytes - static_cast<int64_t>(flush_memory.size_bytes);
  say("profiling " + std::to_string(jobs.jobs.size()) + " jobs and " + std::to_string(jobs.copy_sizes.size()) +
      " copy sizes on " + results.backend.device + " (" + results.backend.backend + ")");
  Clock::time_point last_line = Clock::now();
  for (size_t j = 0; j < jobs.jobs.size(); ++j) {
    results.results.push_back(profile_job(jobs.jobs[j], jobs, stream, free_bytes));
    const rt::JobResult& r = results.results.back();
    const bool last = j + 1 == jobs.jobs.size();
    const double since_s = std::chrono::duration<double>(Clock::now() - last_line).count();
    if (!r.error.empty() || last || since_s >= options.progress_interval_s) {
      std::string line = "[" + std::to_string(j + 1) + "/" + std::to_string(jobs.jobs.size()) + "] " + r.key + ": ";
      if (!r.error.empty())
        line += "error: " + r.error;
      else
        line += std::to_string(r.options.size()) + " option(s), fastest " + r.options.front().algorithm + " " +
                std::to_string(r.options.front().time_ms) + " ms";
      say(line);
      last_line = Clock::now();
    }
  }
  for (int64_t bytes : jobs.copy_sizes) {
    std::string error;
    rt::HostMemory host = rt::host_alloc(static_cast<size_t>(bytes), &error);
    rt::DeviceMemory device;
    if (host.base != nullptr) device = rt::device_alloc(static_cast<size_t>(bytes), &error);
    if (host.base == nullptr || device.base == nullptr) {
      say("copies of " + std::to_string(bytes) + " bytes not timed: " + error);
      rt::host_free(host);
      continue;
    }
    std::memset(host.base, 1, static_cast<size_t>(bytes));
    rt::CopyTiming t;
    t.bytes = bytes;
    t.host_to_device_ms =
        time_copy(stream, device.base, host.base, static_cast<size_t>(bytes), true, jobs.warmup, jobs.repeats);
    t.device_to_host_ms =
        time_copy(stream, device.base, host.base, static_cast<size_t>(bytes), false, jobs.warmup, jobs.repeats);
    rt::device_free(device);
    rt::host_free(host);
    // Both directions at once, where twice the bytes can be had on each side.
    rt::HostMemory host2 = rt::host_alloc(2 * static_cast<size_t>(bytes), &error);
    rt::DeviceMemory device2;
    if (host2.base != nullptr) device2 = rt::device_alloc(2 * static_cast<size_t>(bytes), &error);
    if (host2.base != nullptr && device2.base != nullptr) {
      std::memset(host2.base, 1, 2 * static_cast<size_t>(bytes));
      rt::Stream* other = rt::stream_create("profile-d2h");
      t.both_directions_ms = std::max(0.0, time_both_directions(stream, other, device2.base, host2.base,
                                                                static_cast<size_t>(bytes), jobs.warmup, jobs.repeats));
      rt::stream_destroy(other);
    } else {
      say("copies of " + std::to_string(bytes) + " bytes in both directions at once not timed: " + error);
    }
    rt::device_free(device2);
    rt::host_free(host2);
    if (t.host_to_device_ms <= 0 || t.device_to_host_ms <= 0) {
      // Below the events' resolution: a result file holds only positive copy times.
      say("copies of " + std::to_string(bytes) + " bytes took less than the timer resolves; not recorded");
      continue;
    }
    results.copies.push_back(t);
  }
  rt::stream_destroy(stream);
  if (flush_memory.size_bytes > 0) rt::device_free(flush_memory);
  flush_memory = {};
  return results;
}

}  // namespace mplan::kernel_profiler
