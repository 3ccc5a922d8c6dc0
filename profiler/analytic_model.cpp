// The analytic cost model: per-op work (bytes moved for memory-bound ops,
// GEMMs for linear layers, cuDNN's algorithms for convolutions) turned into
// time by phases_cost and stream_time_ms (kernel_work.h).

#include "profiler/analytic_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/task_invocation.h"

namespace mplan {
namespace {

constexpr double kFloatBytes = 4;

// A streaming kernel: bytes read and written, nothing worth counting computed.
KernelWork streaming(double bytes, int kernels = 1, double flops = 0) {
  return KernelWork{flops, bytes, bytes / kFloatBytes, 1.0, kernels};
}

// A cuBLAS GEMM (its efficiency is the architecture's linear_gemm; tensor
// cores in tf32/fp16/bf16 math).
KernelWork gemm(double flops, double bytes, double parallel_items) {
  KernelWork w{flops, bytes, parallel_items, 1.0, 1};
  w.kind = KernelClass::linear_gemm;
  return w;
}

}  // namespace

std::vector<KernelWork> weight_cast_work(const TaskShape& s) {
  if (s.kind == TaskKind::update || s.copied_parameters == 0) return {};
  // Read the float32 weights, write their 16-bit copy: one kernel.
  return {streaming(6.0 * static_cast<double>(s.copied_parameters), 1, static_cast<double>(s.copied_parameters))};
}

std::vector<TaskOption> with_weight_cast(std::vector<TaskOption> options, const TaskShape& s, double cast_ms) {
  if (s.kind == TaskKind::update || s.copied_parameters == 0) return options;
  for (TaskOption& o : options) {
    o.time_ms += cast_ms;
    o.workspace_bytes += 2 * s.copied_parameters;
  }
  return options;
}

std::vector<KernelWork> task_work(const TaskShape& s, int64_t b, bool recompute) {
  if (s.kind == TaskKind::update) {
    // One kernel per weighted layer: read W and dW, write W, zero dW for the
    // next iteration's accumulation (4 floats a parameter), and read and
    // write each optimizer state element: SGD's momentum (6 floats), AdamW's
    // two moments (8 floats, and about 12 flops with its square root and
    // division).
    // A 16-bit layer's weights are cast again into their copy: 2 bytes more each.
    const double state_per_parameter =
        s.parameters > 0 ? static_cast<double>(s.state_elements) / static_cast<double>(s.parameters) : 0.0;
    const double per_parameter = 4 + 2 * state_per_parameter;
    const double flops = (state_per_parameter > 1 ? 12.0 : 4.0) * static_cast<double>(s.parameters);
    return {streaming(per_parameter * kFloatBytes * s.parameters + 2.0 * s.copied_parameters,
                      static_cast<int>(std::max<int64_t>(s.tensors, 1)), flops)};
  }
  const OpSpec& spec = op_spec(s.op);
  MPLAN_CHECK(spec.work != nullptr, fmt::format("task_work: no model for {} {}", spec.name, task_kind_name(s.kind)));
  std::vector<KernelWork> phases;
  const Layer layer = task_layer(s);
  const OpTask task{layer, s.inputs, s.output, s.kind, static_cast<double>(element_bytes(s.dtype)), recompute};
  for (const WorkEstimate& w : spec.work(task, b)) {
    KernelWork work =
        w.work_class == WorkClass::gemm ? gemm(w.flops, w.bytes, w.parallel_items) : streaming(w.bytes, 1, w.flops);
    work.parallel_items = w.parallel_items;
    work.kernels = w.kernels;
    phases.push_back(work);
  }
  return phases;
}

namespace {

double time_ms(const Device& device, const std::vector<KernelWork>& phases, MathMode math, StreamState stream) {
  return stream_time_ms(phases_cost(device, phases, math), stream);
}

}  // namespace

std::vector<TaskOption> analytic_options(const Device& device, const TaskShape& shape, int64_t sub_batch) {
  return analytic_options(device, shape, sub_batch, device.default_math);
}

std::vector<TaskOption> analytic_options(const Device& device, const TaskShape& shape, int64_t sub_batch,
                                         MathMode math, StreamState stream) {
  MPLAN_CHECK(sub_batch >= 1, "analytic_options: the sub-batch must be at least 1");
  if (shape.kind == TaskKind::update || !op_spec(shape.op).has_algorithms)
    return with_weight_cast({TaskOption{"default", time_ms(device, task_work(shape, sub_batch), math, stream),
                                        task_scratch_bytes(shape, sub_batch)}},
                            shape, time_ms(device, weight_cast_work(shape), math, stream));
  const ConvDirection direction = conv_direction(shape.kind);
  const ConvShape conv = conv_shape(shape);
  std::vector<TaskOption> options;
  for (const std::string& algorithm : conv_algorithm_names(direction)) {
    if (!conv_supported(direction, algorithm, conv)) continue;
    if (!device.arch.runs(direction, algorithm)) continue;  // this architecture's cuDNN does not run it
    options.push_back(TaskOption{algorithm, time_ms(device, conv_work(direction, algorithm, conv, sub_batch), math, stream),
                                 conv_workspace_bytes(direction, algorithm, conv, sub_batch)});
  }
  MPLAN_CHECK(!options.empty(), "analytic_options: no conv algorithm supports the shape");
  options = with_weight_cast(std::move(options), shape, time_ms(device, weight_cast_work(shape), math, stream));
  std::stable_sort(options.begin(), options.end(), [](const TaskOption& a, const TaskOption& b) {
    if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
    return a.workspace_bytes < b.workspace_bytes;
  });
  return options;
}

double analytic_copy_ms(const Device& device, int64_t bytes, bool host_to_device) {
  if (bytes <= 0) return 0;
  const double bandwidth = host_to_device ? device.host_to_device_bytes_per_s : device.device_to_host_bytes_per_s;
  return device.copy_latency_ms + static_cast<double>(bytes) / bandwidth * 1000.0;
}

std::vector<TaskOption> AnalyticCostModel::options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  const int32_t key = keys_.key(tdfg, t);
  const TaskShape& shape = keys_.shape(key);
  const int64_t b = shape.kind == TaskKind::update ? 1 : sub_batch;
  const uint64_t cache_key = (static_cast<uint64_t>(key) << 32) | static_cast<uint32_t>(b);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(cache_key);
    if (it != cache_.end()) return it->second;
  }
  std::vector<TaskOption> result = analytic_options(device_, shape, b, math_);
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.emplace(cache_key, result);
  return result;
}

std::optional<double> AnalyticCostModel::recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  const TaskShape& shape = keys_.shape(keys_.key(tdfg, t));
  return time_ms(device_, task_work(shape, sub_batch, /*recompute=*/true), math_, StreamState::busy);
}

Status check_math_mode(const Device& device, MathMode math) {
  if (device.has_math(math)) return Ok{};
  std::string modes;
  for (MathMode m : device.math_modes) modes += (modes.empty() ? "" : ", ") + std::string(math_mode_name(m));
  return Error{{}, fmt::format("math mode {} is not one of {}'s ({})", math_mode_name(math), device.name, modes)};
}

Result<MathMode> resolve_math_mode(const Device& device, const std::string& model_math) {
  if (model_math.empty() || model_math == "default") return device.default_math;
  const std::optional<MathMode> mode = parse_math_mode(model_math);
  if (!mode) return Error{{}, fmt::format("math '{}' is not a math mode (expected default, fp32 or tf32)", model_math)};
  if (!device.has_math(*mode)) {
    std::string modes;
    for (MathMode m : device.math_modes) modes += (modes.empty() ? "" : ", ") + std::string(math_mode_name(m));
    return Error{{}, fmt::format("the model asks for math {}, which {} does not have (its math modes: {})",
                                 model_math, device.name, modes)};
  }
  return *mode;
}

AnalyticCostModel::AnalyticCostModel(Device device, std::optional<MathMode> math)
    : device_(std::move(device)), math_(math.value_or(device_.default_math)) {
  const Status ok = check_math_mode(device_, math_);
  MPLAN_CHECK(ok.ok(), ok.ok() ? "" : ok.error().message);
}

std::string AnalyticCostModel::describe() const {
  return fmt::format("analytic ({}, {}, math {})", device_.name,
                     device_.source_file.empty() ? "built in" : device_.source_file, math_mode_name(math_));
}

CostModelInfo AnalyticCostModel::info() const {
  CostModelInfo info;
  info.kind = "analytic";
  info.math_mode = math_mode_name(math_);
  info.expected_error = device_.arch.held_out_error.empty()
                            ? fmt::format("not calibrated: no held-out measurements for architecture {}",
                                          device_.arch.name)
                            : fmt::format("architecture {}: {}", device_.arch.name, device_.arch.held_out_error);
  return info;
}

}  // namespace mplan
