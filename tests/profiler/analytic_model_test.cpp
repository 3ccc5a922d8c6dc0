// The analytic cost model: per-sample time never grows with the sub-batch
// (or the planner would pick sub-batch 1), options come fastest first and
// only with supported algorithms, copies are lines in bytes.

#include "profiler/analytic_model.h"

#include <gtest/gtest.h>

#include <map>

#include "profiler/device.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

Device device_or_die(const std::string& name) {
  Result<Device> device = load_device(name);
  EXPECT_TRUE(device.ok()) << (device.ok() ? "" : device.error().to_string());
  if (!device.ok()) std::abort();
  return *device;
}

TaskShape conv_task(TaskKind kind, int64_t C, int64_t HW, int64_t K, int64_t R, int64_t stride, int64_t pad) {
  TaskShape s;
  s.op = Op::conv;
  s.kind = kind;
  s.inputs = {Shape{{C, HW, HW}}};
  const int64_t P = (HW + 2 * pad - R) / stride + 1;
  s.output = Shape{{K, P, P}};
  s.out = K;
  s.window = Window{R, R, stride, stride, pad, pad};
  s.bias = true;
  return s;
}

// Per-sample time of every option, by algorithm, is non-increasing in b.
void expect_per_sample_non_increasing(const Device& device, const TaskShape& shape) {
  std::map<std::string, double> previous;  // algorithm -> time per sample at the previous b
  double previous_fastest = 1e300;
  for (int64_t b = 1; b <= 256; ++b) {
    const std::vector<TaskOption> options = analytic_options(device, shape, b);
    ASSERT_FALSE(options.empty());
    const double fastest = options.front().time_ms / b;
    EXPECT_LE(fastest, previous_fastest * (1 + 1e-12)) << task_signature(shape) << " at b=" << b;
    previous_fastest = fastest;
    for (const TaskOption& o : options) {
      const double per_sample = o.time_ms / b;
      auto it = previous.find(o.algorithm);
      if (it != previous.end())
        EXPECT_LE(per_sample, it->second * (1 + 1e-12)) << task_signature(shape) << " " << o.algorithm << " b=" << b;
      previous[o.algorithm] = per_sample;
    }
  }
}

TEST(AnalyticModel, PerSampleTimeNeverGrowsWithTheSubBatch) {
  for (const char* name : {"k40", "p100", "h100"}) {
    const Device device = device_or_die(name);
    for (TaskKind kind : {TaskKind::FP, TaskKind::BP1, TaskKind::BP2}) {
      expect_per_sample_non_increasing(device, conv_task(kind, 64, 56, 64, 3, 1, 1));    // ResNet 3x3
      expect_per_sample_non_increasing(device, conv_task(kind, 256, 56, 64, 1, 1, 0));   // 1x1
      expect_per_sample_non_increasing(device, conv_task(kind, 3, 224, 64, 7, 2, 3));    // stem
      expect_per_sample_non_increasing(device, conv_task(kind, 64, 27, 192, 5, 1, 2));   // AlexNet 5x5
    }
  }
}

TEST(AnalyticModel, EveryTaskOfAModelHasOptionsAndTheyAreMonotone) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const Device device = device_or_die("v100");
  const AnalyticCostModel cost(device);
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    if (shape.kind != TaskKind::update) expect_per_sample_non_increasing(device, shape);
    const std::vector<TaskOption> options = cost.options(tdfg, t, 8);
    ASSERT_FALSE(options.empty()) << tdfg.tasks[t].name;
    for (size_t i = 1; i < options.size(); ++i) EXPECT_LE(options[i - 1].time_ms, options[i].time_ms);
    if (!tdfg.tasks[t].has_algorithms) {
      ASSERT_EQ(options.size(), 1u) << tdfg.tasks[t].name;
      EXPECT_EQ(options[0].algorithm, "default");
      // Only batch norm's BP1 needs scratch: two floats per channel (the op table).
      const Task& task = tdfg.tasks[t];
      const int64_t scratch = task.op == Op::batchnorm && task.kind == TaskKind::BP1
                                  ? 2 * model.input_shape(task.layer).dims.at(0) * 4
                                  : 0;
      EXPECT_EQ(options[0].workspace_bytes, scratch) << task.name;
    }
    EXPECT_GT(options.front().time_ms, 0) << tdfg.tasks[t].name;
  }
}

TEST(AnalyticModel, SmallSubBatchesAreMuchSlowerPerSample) {
  // The planner trades memory for speed only if sub-batch 1 is clearly worse.
  const Device device = device_or_die("p100");
  const TaskShape shape = conv_task(TaskKind::FP, 128, 28, 128, 3, 1, 1);
  const double at_1 = analytic_options(device, shape, 1).front().time_ms;
  const double at_128 = analytic_options(device, shape, 128).front().time_ms;
  EXPECT_GT(at_1 * 128, 2 * at_128);
}

TEST(AnalyticModel, ConvOptionsAreTheSupportedAlgorithmsFastestFirst) {
  const Device device = device_or_die("titanx");
  const TaskShape stride2 = conv_task(TaskKind::FP, 64, 56, 128, 3, 2, 1);
  for (const TaskOption& o : analytic_options(device, stride2, 32)) {
    EXPECT_NE(o.algorithm.find("winograd"), 0u) << "winograd offered for stride 2";
    EXPECT_NE(o.algorithm.rfind("fft", 0), 0u) << "fft offered for stride 2";
  }
  const TaskShape resnet = conv_task(TaskKind::FP, 64, 56, 64, 3, 1, 1);
  const std::vector<TaskOption> options = analytic_options(device, resnet, 32);
  // implicit_gemm, implicit_precomp_gemm, gemm, fft, fft_tiling, winograd, winograd_nonfused.
  EXPECT_EQ(options.size(), 7u);
  TaskOption lean = options.front();
  for (const TaskOption& o : options)
    if (o.workspace_bytes < lean.workspace_bytes) lean = o;
  EXPECT_EQ(lean.algorithm, "implicit_gemm");
  EXPECT_EQ(lean.workspace_bytes, 0);
}

TEST(AnalyticModel, FastestAndLeanestOptions) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost(device_or_die("p100"));
  const TaskId conv2 = tdfg.fp_of.at(model.find("conv2"));
  const std::vector<TaskOption> options = cost.options(tdfg, conv2, 16);
  EXPECT_EQ(fastest_option(cost, tdfg, conv2, 16).algorithm, options.front().algorithm);
  const TaskOption lean = leanest_option(cost, tdfg, conv2, 16);
  for (const TaskOption& o : options) EXPECT_GE(o.workspace_bytes, lean.workspace_bytes);
  EXPECT_EQ(lean.workspace_bytes, 0);
}

TEST(AnalyticModel, IdenticalLayersShareCachedAnswers) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost(device_or_die("p100"));
  const TaskId conv2 = tdfg.fp_of.at(model.find("conv2"));
  const TaskId conv3 = tdfg.fp_of.at(model.find("conv3"));
  EXPECT_EQ(task_signature(describe_task(tdfg, conv2)), task_signature(describe_task(tdfg, conv3)));
  const auto a = cost.options(tdfg, conv2, 4);
  const auto b = cost.options(tdfg, conv3, 4);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].time_ms, b[i].time_ms);
  // A different model at the same addresses must not reuse the cached keys.
  std::string larger_text = test::kSmallCnn;
  larger_text.replace(larger_text.find("[3, 32, 32]"), 11, "[3, 64, 64]");
  const Model wider = test::parse_or_die(larger_text);
  const Tdfg wider_tdfg = build_tdfg(wider);
  EXPECT_NE(cost.options(wider_tdfg, wider_tdfg.fp_of.at(0), 4).front().time_ms,
            cost.options(tdfg, tdfg.fp_of.at(0), 4).front().time_ms);
}

TEST(AnalyticModel, TransferTimeIsLinearInBytes) {
  const AnalyticCostModel cost(device_or_die("k40"));
  const int64_t n = 64 << 20;
  for (bool h2d : {true, false}) {
    auto t = [&](int64_t bytes) { return h2d ? cost.host_to_device_ms(bytes) : cost.device_to_host_ms(bytes); };
    const double bandwidth = h2d ? 10.04e9 : 10.05e9;
    EXPECT_NEAR(t(3 * n) - t(2 * n), t(2 * n) - t(n), 1e-9);
    EXPECT_NEAR(t(2 * n) - t(n), n / bandwidth * 1000.0, 1e-9);  // slope: 1 / bandwidth
    EXPECT_EQ(t(0), 0);
  }
  // 64 MiB at the K40's 10.04 GB/s: 6.68 ms plus the copy's fixed cost.
  EXPECT_NEAR(cost.host_to_device_ms(n), 0.010 + n / 10.04e9 * 1000.0, 1e-9);
  EXPECT_EQ(cost.copy_engines(), 2);
  EXPECT_EQ(cost.device_memory_bytes(), int64_t{12} << 30);
}

}  // namespace
}  // namespace mplan
