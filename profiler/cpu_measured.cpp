// The measured CPU cost model: times the CPU runtime's ops and convolution
// algorithms (runtime/cpu/*) per task shape and sub-batch.

#include "profiler/cpu_measured.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>

#include "profiler/runtime_conv_shape.h"
#include "runtime/conv.h"
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

// Buffers filled with small values (random, so that max-pool and relu take
// their real branches); one per role, sized on demand.
struct Buffers {
  std::vector<std::vector<float>> storage;
  std::mt19937 random{12345};
  float* make(int64_t count) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    storage.emplace_back(static_cast<size_t>(std::max<int64_t>(count, 1)));
    for (float& v : storage.back()) v = uniform(random);
    return storage.back().data();
  }
};

int64_t elements(const Shape& s) { return s.elements(); }
std::pair<int64_t, int64_t> channels_hw(const Shape& s) {
  int64_t hw = 1;
  for (size_t i = 1; i < s.dims.size(); ++i) hw *= s.dims[i];
  return {s.dims.at(0), hw};
}

std::vector<TaskOption> measure_conv(const TaskShape& shape, int64_t n, const CpuMeasureOptions& options) {
  const rt::ConvShape s = runtime_conv_shape(shape.inputs.at(0), shape.out, shape.window, shape.groups, n);
  const rt::ConvDirection direction = shape.kind == TaskKind::FP    ? rt::ConvDirection::forward
                                      : shape.kind == TaskKind::BP1 ? rt::ConvDirection::backward_data
                                                                    : rt::ConvDirection::backward_filter;
  Buffers b;
  float* x = b.make(s.x_elements());
  float* w = b.make(s.w_elements() + s.k);
  float* y = b.make(s.y_elements());
  std::vector<TaskOption> result;
  for (rt::ConvAlgo algo : rt::kConvAlgos) {
    if (!rt::conv_algo_supported(algo, direction, s)) continue;
    const size_t workspace_bytes = rt::conv_workspace_bytes(algo, direction, s);
    std::vector<float> workspace(workspace_bytes / sizeof(float) + 1);
    auto run = [&] {
      switch (direction) {
        case rt::ConvDirection::forward:
          rt::conv_forward(algo, s, x, w, shape.bias ? w + s.w_elements() : nullptr, y, workspace.data(),
                           workspace_bytes);
          break;
        case rt::ConvDirection::backward_data:
          rt::conv_backward_data(algo, s, w, y, x, workspace.data(), workspace_bytes, false);
          break;
        case rt::ConvDirection::backward_filter:
          rt::conv_backward_filter(algo, s, x, y, w, workspace.data(), workspace_bytes, true);
          if (shape.bias) rt::conv_backward_bias(s, y, w + s.w_elements(), true);
          break;
      }
    };
    result.push_back({rt::conv_algo_name(algo), time_ms(run, options), static_cast<int64_t>(workspace_bytes)});
  }
  std::sort(result.begin(), result.end(),
            [](const TaskOption& a, const TaskOption& b) { return a.time_ms < b.time_ms; });
  return result;
}

// One runner per op and task kind: the runtime call the generated program makes.
std::function<void()> op_runner(const TaskShape& shape, int64_t n, Buffers& b) {
  const Shape& in = shape.inputs.empty() ? shape.output : shape.inputs[0];
  const int64_t in_count = n * elements(in), out_count = n * elements(shape.output);
  const bool fp = shape.kind == TaskKind::FP;
  switch (shape.op) {
    case Op::linear: {
      const int64_t i = elements(in), o = shape.out;
      float *x = b.make(in_count), *w = b.make(i * o + o), *y = b.make(n * o), *dw = b.make(i * o + o);
      if (fp) return [=] { rt::linear_forward(x, w, shape.bias ? w + i * o : nullptr, y, n, i, o); };
      if (shape.kind == TaskKind::BP1) return [=] { rt::linear_backward_data(w, y, x, n, i, o, false); };
      return [=] {
        rt::linear_backward_weights(x, y, dw, n, i, o, true);
        if (shape.bias) rt::linear_backward_bias(y, dw + i * o, n, o, true);
      };
    }
    case Op::relu: {
      float *x = b.make(in_count), *y = b.make(in_count), *dx = b.make(in_count);
      if (fp) return [=] { rt::relu_forward(x, y, in_count); };
      return [=] { rt::relu_backward(y, x, dx, in_count, false); };
    }
    case Op::flatten: {
      float *x = b.make(in_count), *y = b.make(in_count);
      if (fp) return [=] { rt::flatten_forward(x, y, in_count); };
      return [=] { rt::flatten_backward(y, x, in_count, false); };
    }
    case Op::pool: {
      rt::PoolShape p;
      p.n = n;
      p.c = in.dims.at(0);
      p.h = in.dims.at(1);
      p.w = in.dims.at(2);
      p.kernel_h = shape.window.kernel_h;
      p.kernel_w = shape.window.kernel_w;
      p.stride_h = shape.window.stride_h;
      p.stride_w = shape.window.stride_w;
      p.pad_h = shape.window.pad_h;
      p.pad_w = shape.window.pad_w;
      float *x = b.make(in_count), *y = b.make(out_count), *dy = b.make(out_count), *dx = b.make(in_count);
      if (shape.pool_mode == PoolMode::max) {
        if (fp) return [=] { rt::max_pool_forward(p, x, y); };
        return [=] { rt::max_pool_backward(p, x, y, dy, dx, false); };
      }
      if (fp) return [=] { rt::avg_pool_forward(p, x, y); };
      return [=] { rt::avg_pool_backward(p, dy, dx, false); };
    }
    case Op::global_avgpool: {
      auto [c, hw] = channels_hw(in);
      float *x = b.make(in_count), *y = b.make(n * c);
      if (fp) return [=, c = c, hw = hw] { rt::global_avg_pool_forward(x, y, n, c, hw); };
      return [=, c = c, hw = hw] { rt::global_avg_pool_backward(y, x, n, c, hw, false); };
    }
    case Op::batchnorm: {
      auto [c, hw] = channels_hw(in);
      float *x = b.make(in_count), *y = b.make(in_count), *dy = b.make(in_count), *params = b.make(8 * c);
      if (fp)
        return [=, c = c, hw = hw] {
          rt::batchnorm_forward_train(x, params, params + c, y, params + 2 * c, params + 3 * c, params + 4 * c,
                                      params + 5 * c, n, c, hw, 1e-5f, 0.1f);
        };
      // The calls the generated program makes: BP1 writes dx, BP2 the parameter gradients.
      float* stats = b.make(2 * c);
      for (int64_t i = 0; i < 2 * c; ++i) stats[i] = 1.0f;
      if (shape.kind == TaskKind::BP1)
        return [=, c = c, hw = hw] {
          rt::batchnorm_backward_data(x, params, stats, stats + c, dy, y, n, c, hw, false);
        };
      return [=, c = c, hw = hw] {
        rt::batchnorm_backward_params(x, stats, stats + c, dy, params + 6 * c, params + 7 * c, n, c, hw, true);
      };
    }
    case Op::lrn: {
      auto [c, hw] = channels_hw(in);
      float *x = b.make(in_count), *y = b.make(in_count), *dx = b.make(in_count);
      const int64_t size = shape.lrn_size;
      if (fp) return [=, c = c, hw = hw] { rt::lrn_forward(x, y, n, c, hw, size, 1e-4f, 0.75f, 2.0f); };
      return [=, c = c, hw = hw] { rt::lrn_backward(x, y, dx, n, c, hw, size, 1e-4f, 0.75f, 2.0f, false); };
    }
    case Op::dropout: {
      float *x = b.make(in_count), *y = b.make(in_count);
      auto mask = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(in_count), 1);
      const int64_t per_sample = elements(in);
      if (fp) return [=] { rt::dropout_forward(x, y, mask->data(), n, per_sample, 0, 0.5f, 1, 0); };
      return [=] { rt::dropout_backward(mask->data(), y, x, in_count, 0.5f, false); };
    }
    case Op::add: {
      const int count = static_cast<int>(shape.inputs.size());
      auto inputs = std::make_shared<std::vector<const float*>>();
      for (int k = 0; k < count; ++k) inputs->push_back(b.make(in_count));
      float *y = b.make(in_count), *dx = b.make(in_count);
      if (fp) return [=] { rt::add_forward(inputs->data(), count, y, in_count); };
      return [=] {
        for (int k = 0; k < count; ++k) rt::add_backward(y, dx, in_count, k > 0);
      };
    }
    case Op::concat: {
      auto inputs = std::make_shared<std::vector<const float*>>();
      auto channels = std::make_shared<std::vector<int64_t>>();
      const int64_t hw = channels_hw(shape.output).second, total = shape.output.dims.at(0);
      for (const Shape& s : shape.inputs) {
        inputs->push_back(b.make(n * elements(s)));
        channels->push_back(s.dims.at(0));
      }
      float *y = b.make(out_count), *dx = b.make(out_count);
      if (fp)
        return [=] {
          rt::concat_forward(inputs->data(), channels->data(), static_cast<int>(inputs->size()), y, n, hw);
        };
      return [=] {
        int64_t offset = 0;
        for (int64_t ch : *channels) {
          rt::concat_backward(y, dx, n, total, offset, ch, hw, false);
          offset += ch;
        }
      };
    }
    case Op::softmax_xent: {
      const int64_t classes = elements(in);
      float *logits = b.make(in_count), *probs = b.make(in_count), *loss = b.make(1);
      auto labels = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(n), 0);
      if (fp) return [=] { rt::softmax_xent_forward(logits, labels->data(), probs, loss, n, classes, false); };
      return [=] { rt::softmax_xent_backward(probs, labels->data(), logits, n, classes, 1.0f / n, false); };
    }
    case Op::conv: break;  // measure_conv
  }
  return [] {};
}

}  // namespace

std::vector<TaskOption> measure_cpu_task(const TaskShape& shape, int64_t sub_batch, const CpuMeasureOptions& options) {
  if (shape.kind == TaskKind::update) {
    Buffers b;
    const int64_t count = std::max<int64_t>(shape.parameters, 1);
    float *w = b.make(count), *g = b.make(count), *m = b.make(count);
    const bool momentum = shape.state_elements > 0;
    double ms = time_ms([=] { rt::sgd_step(w, g, momentum ? m : nullptr, count, 1e-6f, momentum ? 0.9f : 0.0f, 0.0f, false); },
                        options);
    return {{"default", ms, 0}};
  }
  if (shape.op == Op::conv) return measure_conv(shape, sub_batch, options);
  Buffers b;
  std::function<void()> run = op_runner(shape, sub_batch, b);
  return {{"default", time_ms(run, options), 0}};
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
  return cache_[cache_key] = measure_cpu_task(shape, sub_batch, options_);
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
