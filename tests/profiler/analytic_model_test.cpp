// The analytic cost model: per-sample time never grows with the sub-batch
// (or the planner would pick sub-batch 1), options come fastest first and
// only with supported algorithms, copies are lines in bytes.

#include "profiler/analytic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "profiler/conv_algorithms.h"
#include "profiler/device.h"
#include "profiler/kernel_work.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

using test::device_or_die;

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
      if (it != previous.end()) {
        EXPECT_LE(per_sample, it->second * (1 + 1e-12)) << task_signature(shape) << " " << o.algorithm << " b=" << b;
      }
      previous[o.algorithm] = per_sample;
    }
  }
}

TEST(AnalyticModel, PerSampleTimeNeverGrowsWithTheSubBatch) {
  for (const char* name : {"k40", "p100", "v100", "h100"}) {  // h100: TF32, its default
    const Device device = device_or_die(name);
    for (TaskKind kind : {TaskKind::FP, TaskKind::BP1, TaskKind::BP2}) {
      expect_per_sample_non_increasing(device, conv_task(kind, 64, 56, 64, 3, 1, 1));    // ResNet 3x3
      expect_per_sample_non_increasing(device, conv_task(kind, 256, 56, 64, 1, 1, 0));   // 1x1
      expect_per_sample_non_increasing(device, conv_task(kind, 3, 224, 64, 7, 2, 3));    // stem
      expect_per_sample_non_increasing(device, conv_task(kind, 64, 27, 192, 5, 1, 2));   // AlexNet 5x5
      TaskShape depthwise = conv_task(kind, 128, 16, 128, 3, 1, 1);                      // MobileNet
      depthwise.groups = 128;
      expect_per_sample_non_increasing(device, depthwise);
    }
  }
}

// The GEMM families' tile cost (reduction_half_length) grows with the
// backward-filter chunk b*P*Q up to 1024 and is fixed otherwise: still monotone.
TEST(AnalyticModel, PerSampleTimeNeverGrowsWithTheSubBatchWithTileCosts) {
  Device device = device_or_die("k40");
  for (ConvFamily f : {ConvFamily::implicit_gemm, ConvFamily::implicit_precomp_gemm, ConvFamily::gemm})
    device.arch.reduction_half_length[static_cast<int>(f)] = 500;
  device.arch.filter_reduction_chunk[static_cast<int>(ConvFamily::implicit_precomp_gemm)] = 30000;
  device.arch.filter_reduction_chunk[static_cast<int>(ConvFamily::gemm)] = 100;
  for (TaskKind kind : {TaskKind::FP, TaskKind::BP1, TaskKind::BP2}) {
    expect_per_sample_non_increasing(device, conv_task(kind, 64, 56, 64, 3, 1, 1));
    expect_per_sample_non_increasing(device, conv_task(kind, 256, 7, 64, 1, 1, 0));  // b*P*Q below 1024 at small b
    expect_per_sample_non_increasing(device, conv_task(kind, 3, 224, 64, 7, 2, 3));
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

// The update moves W, dW and the optimizer state: AdamW's two moments cost
// more than SGD's momentum, which costs more than none (4, 6 and 8 floats a
// parameter), and the three are priced apart.
TEST(AnalyticModel, TheUpdateIsPricedByItsOptimizersState) {
  const Device device = device_or_die("v100");
  const AnalyticCostModel cost(device);
  std::vector<double> times;
  for (const char* optimizer : {"{kind: sgd, lr: 0.1, momentum: 0}", "{kind: sgd, lr: 0.1, momentum: 0.9}",
                                "{kind: adamw, lr: 0.001}"}) {
    // 16.8 M parameters: the update is bound by its bytes, not its launches.
    const Model model = test::parse_or_die("name: wide\ninput: [1, 64, 64]\nbatch: 4\nclasses: 10\noptimizer: " +
                                           std::string(optimizer) +
                                           "\nlayers:\n  - {name: flat, op: flatten}\n"
                                           "  - {name: fc1, op: linear, out: 4096}\n"
                                           "  - {name: fc2, op: linear, out: 10}\n"
                                           "  - {name: loss, op: softmax_xent}\n");
    const Tdfg tdfg = build_tdfg(model);
    times.push_back(cost.options(tdfg, tdfg.update_task, 1).front().time_ms);
  }
  EXPECT_LT(times[0], times[1]);
  EXPECT_LT(times[1], times[2]);
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

double fastest_ms(const Device& device, const TaskShape& shape, int64_t b, MathMode math) {
  return analytic_options(device, shape, b, math).front().time_ms;
}

double option_ms(const Device& device, const TaskShape& shape, int64_t b, MathMode math, const std::string& algorithm,
                 StreamState stream = StreamState::busy) {
  for (const TaskOption& o : analytic_options(device, shape, b, math, stream))
    if (o.algorithm == algorithm) return o.time_ms;
  ADD_FAILURE() << "no option " << algorithm;
  return 0;
}

// The tile cost of the GEMM families: an output tile's fixed cost is
// amortised by the reduction it sums, so a 1x1 layer over 64 channels loses
// far more of its family's efficiency than a 3x3 layer over 256 (on the H100
// the precomputed GEMM reaches 0.11 of peak on the first, 0.5 on the second).
TEST(AnalyticModel, GemmTileCostIsAmortisedByTheReduction) {
  Device device = device_or_die("titanx");
  const int ipg = static_cast<int>(ConvFamily::implicit_precomp_gemm);
  const ConvShape one = make_conv_shape(64, 56, 56, 64, 1, 1, 1, 0);
  const ConvShape three = make_conv_shape(256, 28, 28, 128, 3, 3, 1, 1);
  auto conv_phase = [](ConvDirection d, const std::string& algorithm, const ConvShape& s, int64_t b) {
    for (const KernelWork& w : conv_work(d, algorithm, s, b))
      if (w.kind == KernelClass::conv) return w;
    ADD_FAILURE() << "no conv phase";
    return KernelWork{};
  };
  // The reduction one tile sums, per direction.
  EXPECT_EQ(conv_phase(ConvDirection::forward, "implicit_precomp_gemm", one, 8).reduction_length, 64);
  EXPECT_EQ(conv_phase(ConvDirection::forward, "gemm", three, 8).reduction_length, 256 * 9);
  EXPECT_EQ(conv_phase(ConvDirection::backward_data, "algo_1", three, 8).reduction_length, 128 * 9);
  EXPECT_EQ(conv_phase(ConvDirection::backward_filter, "algo_0", three, 1).reduction_length, 784);   // b*P*Q
  EXPECT_EQ(conv_phase(ConvDirection::backward_filter, "algo_3", three, 8).reduction_length, 1024);  // split-K chunk
  EXPECT_EQ(conv_phase(ConvDirection::forward, "winograd_nonfused", three, 8).reduction_length, 0);  // not a GEMM tile

  const KernelWork w1 = conv_phase(ConvDirection::forward, "implicit_precomp_gemm", one, 64);
  const KernelWork w3 = conv_phase(ConvDirection::forward, "implicit_precomp_gemm", three, 64);
  double peak = 0;
  const double flat1 = work_efficiency(device, w1, MathMode::fp32, peak);
  const double flat3 = work_efficiency(device, w3, MathMode::fp32, peak);
  EXPECT_DOUBLE_EQ(flat1, flat3);  // no tile cost in the table: one efficiency per family
  const double before = option_ms(device, conv_task(TaskKind::FP, 256, 28, 128, 3, 1, 1), 64, MathMode::fp32,
                                  "implicit_precomp_gemm");
  device.arch.reduction_half_length[ipg] = 256 * 9;
  EXPECT_DOUBLE_EQ(work_efficiency(device, w1, MathMode::fp32, peak), flat1 * 64 / (64 + 2304.0));
  EXPECT_DOUBLE_EQ(work_efficiency(device, w3, MathMode::fp32, peak), flat3 / 2);
  // Tensor-core math pays the same tile cost.
  Device tensor = device_or_die("a100-80gb");
  const double tf32 = work_efficiency(tensor, w3, MathMode::tf32, peak);
  tensor.arch.reduction_half_length[ipg] = 256 * 9;
  EXPECT_DOUBLE_EQ(work_efficiency(tensor, w3, MathMode::tf32, peak), tf32 / 2);
  // A compute-bound layer whose reduction equals the half length takes about twice as long.
  const double after = option_ms(device, conv_task(TaskKind::FP, 256, 28, 128, 3, 1, 1), 64, MathMode::fp32,
                                 "implicit_precomp_gemm");
  EXPECT_NEAR(after / before, 2.0, 0.15);
  // Other families are untouched.
  const KernelWork wino = conv_phase(ConvDirection::forward, "winograd_nonfused", three, 64);
  Device plain = device_or_die("titanx");
  EXPECT_DOUBLE_EQ(work_efficiency(device, wino, MathMode::fp32, peak),
                   work_efficiency(plain, wino, MathMode::fp32, peak));
}

// A backward-filter GEMM kernel splits its b*P*Q reduction at its
// architecture's chunk (cuDNN's weight-gradient kernels split differently
// from family to family): fewer, longer CTAs for a larger chunk.
TEST(AnalyticModel, BackwardFilterSplitsAtTheArchitecturesChunk) {
  Device device = device_or_die("titanx");
  const ConvShape one = make_conv_shape(64, 56, 56, 64, 1, 1, 1, 0);  // 4096 weights, b*P*Q = 3136 b
  KernelWork w;
  for (const KernelWork& phase : conv_work(ConvDirection::backward_filter, "algo_1", one, 32))
    if (phase.kind == KernelClass::conv) w = phase;
  EXPECT_EQ(w.filter_elements, 4096);
  EXPECT_EQ(w.filter_reduction, 32 * 3136);
  // The default: 1024 per CTA.
  EXPECT_EQ(effective_work(device.arch, w).parallel_items, w.parallel_items);
  EXPECT_EQ(w.parallel_items, 4096 * std::ceil(32 * 3136 / 1024.0));
  const double before = option_ms(device, conv_task(TaskKind::BP2, 64, 56, 64, 1, 1, 0), 32, MathMode::fp32, "algo_1");
  const int ipg = static_cast<int>(ConvFamily::implicit_precomp_gemm);
  device.arch.filter_reduction_chunk[ipg] = 32768;
  const KernelWork split = effective_work(device.arch, w);
  EXPECT_EQ(split.parallel_items, 4096 * std::ceil(32 * 3136 / 32768.0));
  EXPECT_EQ(split.reduction_length, 32768);
  const double after = option_ms(device, conv_task(TaskKind::BP2, 64, 56, 64, 1, 1, 0), 32, MathMode::fp32, "algo_1");
  EXPECT_GT(after, 2 * before);  // 16 CTAs' worth of work per weight instead of 98: the GPU is far from full
  // Other families and directions keep the default.
  KernelWork algo0;
  for (const KernelWork& phase : conv_work(ConvDirection::backward_filter, "algo_0", one, 32))
    if (phase.kind == KernelClass::conv) algo0 = phase;
  EXPECT_EQ(effective_work(device.arch, algo0).parallel_items, algo0.parallel_items);
  KernelWork forward;
  for (const KernelWork& phase : conv_work(ConvDirection::forward, "implicit_precomp_gemm", one, 32))
    if (phase.kind == KernelClass::conv) forward = phase;
  EXPECT_EQ(forward.filter_reduction, 0);
  EXPECT_EQ(effective_work(device.arch, forward).parallel_items, forward.parallel_items);
}

// A pointwise convolution (1x1, stride 1, no padding) runs its GEMM family at
// the architecture's pointwise factor; a 1x1 at stride 2, a padded 1x1 and a
// 3x3 do not, and nor do the FFT and Winograd families (the H100's GEMM
// kernels' bias differs by 0.69-1.22x between pointwise and other layers: docs/cost-model.md).
TEST(AnalyticModel, PointwiseConvolutionsRunAtTheirOwnFactor) {
  EXPECT_TRUE(conv_is_pointwise(make_conv_shape(256, 56, 56, 64, 1, 1, 1, 0)));
  EXPECT_FALSE(conv_is_pointwise(make_conv_shape(256, 56, 56, 512, 1, 1, 2, 0)));  // ResNet's projection
  EXPECT_FALSE(conv_is_pointwise(make_conv_shape(256, 56, 56, 64, 1, 1, 1, 1)));
  EXPECT_FALSE(conv_is_pointwise(make_conv_shape(64, 56, 56, 64, 3, 3, 1, 1)));
  EXPECT_FALSE(conv_is_pointwise(make_conv_shape(256, 56, 56, 64, 1, 1, 1, 0, 4)));  // grouped (ShuffleNet)
  ConvShape wide = make_conv_shape(64, 56, 56, 64, 1, 1, 1, 0);
  wide.stride_w = 2;
  wide.Q = 28;
  EXPECT_FALSE(conv_is_pointwise(wide));

  Device device = device_or_die("titanx");
  const TaskShape pointwise = conv_task(TaskKind::FP, 256, 56, 64, 1, 1, 0);
  const TaskShape strided = conv_task(TaskKind::FP, 256, 56, 512, 1, 2, 0);
  const TaskShape three = conv_task(TaskKind::FP, 64, 56, 64, 3, 1, 1);
  TaskShape pointwise_filter = pointwise;
  pointwise_filter.kind = TaskKind::BP2;
  auto times = [&](const Device& d) {
    return std::vector<double>{option_ms(d, pointwise, 32, MathMode::fp32, "implicit_gemm"),
                               option_ms(d, pointwise, 32, MathMode::fp32, "implicit_precomp_gemm"),
                               option_ms(d, pointwise, 32, MathMode::fp32, "fft_tiling"),
                               option_ms(d, strided, 32, MathMode::fp32, "implicit_gemm"),
                               option_ms(d, three, 32, MathMode::fp32, "implicit_gemm"),
                               option_ms(d, pointwise_filter, 32, MathMode::fp32, "algo_0")};
  };
  const std::vector<double> before = times(device);
  // The shipped tables other than Hopper's have no pointwise data: factor 1.
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter})
    EXPECT_EQ(device.arch.pointwise_factor(ConvFamily::implicit_gemm, d), 1.0);
  device.arch.pointwise[static_cast<int>(ConvFamily::implicit_gemm)][static_cast<int>(ConvDirection::forward)] = 0.5;
  const std::vector<double> after = times(device);
  // Compute bound at 32 x 3136 outputs: about twice the time at half the efficiency.
  EXPECT_GT(after[0], 1.8 * before[0]);
  EXPECT_DOUBLE_EQ(after[1], before[1]);  // another family
  EXPECT_DOUBLE_EQ(after[2], before[2]);  // FFT tiling is no GEMM family
  EXPECT_DOUBLE_EQ(after[3], before[3]);  // stride 2: not pointwise
  EXPECT_DOUBLE_EQ(after[4], before[4]);  // 3x3
  EXPECT_DOUBLE_EQ(after[5], before[5]);  // another direction of the family
  // The shipped Hopper table, fitted on the H100 and H200: on pointwise
  // layers the implicit GEMM beats the precomputed one (the measured fastest
  // there), on a small layer and a large one.
  const Device h100 = device_or_die("h100");
  const TaskShape small = conv_task(TaskKind::FP, 64, 8, 64, 1, 1, 0);
  for (const TaskShape* shape : {&small, &pointwise})
    EXPECT_LT(option_ms(h100, *shape, 32, MathMode::fp32, "implicit_gemm"),
              option_ms(h100, *shape, 32, MathMode::fp32, "implicit_precomp_gemm"));
}

// A cuDNN call pays its fixed cost once, on its first kernel (its family's
// where the table has one), and a smaller one per further kernel: cuDNN 9's
// legacy API on the H200 runs a 4-kernel FFT in 50-60 us and a lone
// implicit-GEMM kernel in 33-36 us (docs/cost-model.md, "Fixed costs").
TEST(AnalyticModel, ACudnnCallPaysItsFixedCostOnce) {
  Device device = device_or_die("titanx");
  const TaskShape tiny = conv_task(TaskKind::FP, 16, 8, 16, 3, 1, 1);  // launch-bound at b = 1
  // Timed alone (the kernel profiler's idle stream): every fixed cost adds.
  auto ms = [&](const Device& d, const char* algorithm) {
    return option_ms(d, tiny, 1, MathMode::fp32, algorithm, StreamState::idle);
  };
  device.arch.conv_call_overhead_us = 30;
  ASSERT_LT(device.arch.conv_kernel_overhead_us, 0);  // tables fitted on networks: every kernel pays the call's
  EXPECT_DOUBLE_EQ(device.arch.kernel_overhead_us(), 30);
  const double fft = ms(device, "fft"), gemm = ms(device, "gemm"), implicit = ms(device, "implicit_gemm");
  device.arch.conv_kernel_overhead_us = 2;
  // FFT: two forward transforms, the complex GEMM, the inverse: 3 further kernels;
  // explicit GEMM: im2col, then the GEMM: 1; implicit GEMM: one kernel.
  EXPECT_NEAR(fft - ms(device, "fft"), 3 * 0.028, 1e-9);
  EXPECT_NEAR(gemm - ms(device, "gemm"), 1 * 0.028, 1e-9);
  EXPECT_DOUBLE_EQ(ms(device, "implicit_gemm"), implicit);
  // A family's own call overhead in a direction replaces the table's on its
  // first kernel only, in that direction only.
  const double precomp = ms(device, "implicit_precomp_gemm");
  TaskShape backward = tiny;
  backward.kind = TaskKind::BP1;
  const double backward_precomp = option_ms(device, backward, 1, MathMode::fp32, "algo_1", StreamState::idle);
  device.arch.family_call_overhead_us[static_cast<int>(ConvFamily::implicit_precomp_gemm)][0] = 100;
  EXPECT_NEAR(ms(device, "implicit_precomp_gemm") - precomp, 0.070, 1e-9);
  EXPECT_DOUBLE_EQ(ms(device, "implicit_gemm"), implicit);
  EXPECT_DOUBLE_EQ(option_ms(device, backward, 1, MathMode::fp32, "algo_1", StreamState::idle), backward_precomp);
  // The shipped Hopper table, fitted on the H100's and H200's kernel times:
  // a further kernel costs less than a call, and the precomputed GEMM's
  // forward and backward-data calls on pointwise layers more than twice its
  // calls elsewhere (its small calls take 0.12-0.16 ms on 1x1 layers, 0.06-0.07
  // ms on 3x3 ones).
  const Device h200 = device_or_die("h200");
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data}) {
    EXPECT_LT(h200.arch.kernel_overhead_us(), 0.5 * h200.arch.call_overhead_us(ConvFamily::implicit_gemm, d));
    EXPECT_GT(h200.arch.call_overhead_us(ConvFamily::implicit_precomp_gemm, d, /*pointwise=*/true),
              2 * h200.arch.call_overhead_us(ConvFamily::implicit_precomp_gemm, d));
  }
  // A family's pointwise call overhead is paid by the call's first kernel on
  // a pointwise layer only.
  Device hopper = h200;
  const int ipg = static_cast<int>(ConvFamily::implicit_precomp_gemm);
  const TaskShape pointwise = conv_task(TaskKind::FP, 16, 8, 16, 1, 1, 0);
  const double pointwise_precomp = option_ms(hopper, pointwise, 1, MathMode::fp32, "implicit_precomp_gemm");
  const double tiny_precomp = option_ms(hopper, tiny, 1, MathMode::fp32, "implicit_precomp_gemm");
  const double pointwise_implicit = option_ms(hopper, pointwise, 1, MathMode::fp32, "implicit_gemm");
  hopper.arch.pointwise_call_overhead_us[ipg][0] += 100;
  EXPECT_NEAR(option_ms(hopper, pointwise, 1, MathMode::fp32, "implicit_precomp_gemm") - pointwise_precomp, 0.1, 1e-9);
  EXPECT_DOUBLE_EQ(option_ms(hopper, tiny, 1, MathMode::fp32, "implicit_precomp_gemm"), tiny_precomp);
  EXPECT_DOUBLE_EQ(option_ms(hopper, pointwise, 1, MathMode::fp32, "implicit_gemm"), pointwise_implicit);
  // Unset (negative): the family's call overhead.
  hopper.arch.pointwise_call_overhead_us[ipg][0] = -1;
  hopper.arch.family_call_overhead_us[ipg][0] = 40;
  EXPECT_DOUBLE_EQ(hopper.arch.call_overhead_us(ConvFamily::implicit_precomp_gemm, ConvDirection::forward, true), 40);
}

// A grouped convolution as cuDNN 9 runs it (conv_algorithms.cpp,
// grouped_conv_work; the H200 timed FFT on 128 depthwise groups at 6 ms, 45-55
// us a group, where one call over all groups was priced at 0.08 ms): the
// transform algorithms loop over the groups, so 128 groups cost close to 128
// one-group calls; every GEMM algorithm runs the implicit GEMM's grouped
// kernel, so it costs what the implicit GEMM does.
TEST(AnalyticModel, GroupedConvTransformsLoopOverGroupsGemmsShareOneKernel) {
  const Device h200 = device_or_die("h200");
  auto ms = [&](ConvDirection d, const char* algorithm, const ConvShape& s) {
    double t = 0;
    for (const KernelWork& w : conv_work(d, algorithm, s, 32)) t += kernel_time_ms(h200, w);
    return t;
  };
  const ConvShape depthwise = make_conv_shape(128, 8, 8, 128, 3, 3, 1, 1, /*groups=*/128);
  const ConvShape one_group = make_conv_shape(1, 8, 8, 1, 3, 3, 1, 1);
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter})
    for (const char* transform : {"fft", "winograd_nonfused"}) {
      const double call = ms(d, transform, one_group);
      // One call, then 127 groups' launches, each without the call's fixed cost.
      EXPECT_GT(ms(d, transform, depthwise), 64 * call) << transform;
      EXPECT_LE(ms(d, transform, depthwise), 128 * call * (1 + 1e-12)) << transform;
    }
  EXPECT_GT(ms(ConvDirection::forward, "fft", depthwise), 20 * ms(ConvDirection::forward, "implicit_gemm", depthwise));
  for (const char* gemm : {"implicit_precomp_gemm", "gemm"})
    EXPECT_DOUBLE_EQ(ms(ConvDirection::forward, gemm, depthwise), ms(ConvDirection::forward, "implicit_gemm", depthwise));
  EXPECT_DOUBLE_EQ(ms(ConvDirection::backward_data, "algo_1", depthwise),
                   ms(ConvDirection::backward_data, "algo_0", depthwise));
  for (const char* gemm : {"algo_1", "algo_3"})
    EXPECT_DOUBLE_EQ(ms(ConvDirection::backward_filter, gemm, depthwise),
                     ms(ConvDirection::backward_filter, "algo_0", depthwise));
  // An ungrouped layer, and one with wider groups, keep each GEMM
  // algorithm's own phases; the transforms still loop over the groups.
  const ConvShape dense = make_conv_shape(128, 8, 8, 128, 3, 3, 1, 1);
  const ConvShape two_groups = make_conv_shape(128, 8, 8, 128, 3, 3, 1, 1, /*groups=*/2);
  for (const ConvShape* wide : {&dense, &two_groups})
    EXPECT_GT(ms(ConvDirection::forward, "gemm", *wide), ms(ConvDirection::forward, "implicit_gemm", *wide));
  const ConvShape half = make_conv_shape(64, 8, 8, 64, 3, 3, 1, 1);
  EXPECT_GT(ms(ConvDirection::forward, "fft", two_groups), 1.5 * ms(ConvDirection::forward, "fft", half));
  // The bias is added once, over every group's output.
  ConvShape with_bias = depthwise;
  with_bias.bias = true;
  const double bias_add = kernel_time_ms(h200, conv_work(ConvDirection::forward, "fft", with_bias, 32).back());
  EXPECT_NEAR(ms(ConvDirection::forward, "fft", with_bias) - ms(ConvDirection::forward, "fft", depthwise), bias_add,
              1e-12);
}

// An architecture whose cuDNN does not run an algorithm (cuDNN 9 on Hopper:
// no fused Winograd, no backward-filter FFT tiling in FP32) does not offer it.
TEST(AnalyticModel, OffersOnlyTheAlgorithmsTheArchitecturesCudnnRuns) {
  Device device = device_or_die("titanx");
  const TaskShape resnet = conv_task(TaskKind::FP, 64, 56, 64, 3, 1, 1);
  auto names = [&](const Device& d, const TaskShape& s) {
    std::set<std::string> out;
    for (const TaskOption& o : analytic_options(d, s, 32)) out.insert(o.algorithm);
    return out;
  };
  EXPECT_TRUE(names(device, resnet).count("winograd"));
  device.arch.unavailable[static_cast<int>(ConvDirection::forward)] = {"winograd"};
  const std::set<std::string> left = names(device, resnet);
  EXPECT_FALSE(left.count("winograd"));
  EXPECT_EQ(left.size(), 6u);
  EXPECT_TRUE(names(device, conv_task(TaskKind::BP1, 64, 56, 64, 3, 1, 1)).count("winograd"));  // other directions keep it
  // The shipped Hopper table (fitted on what cuDNN 9.19 ran on the H100).
  const Device h100 = device_or_die("h100");
  EXPECT_FALSE(names(h100, resnet).count("winograd"));
  EXPECT_FALSE(names(h100, conv_task(TaskKind::BP1, 64, 56, 64, 3, 1, 1)).count("winograd"));
  EXPECT_FALSE(names(h100, conv_task(TaskKind::BP2, 64, 56, 64, 3, 1, 1)).count("fft_tiling"));
  EXPECT_TRUE(names(h100, resnet).count("winograd_nonfused"));
  EXPECT_TRUE(names(h100, resnet).count("fft_tiling"));
}

// Backward-filter of layers with few weights (1x1, 3-channel first layers)
// splits its b*P*Q reduction over as many CTAs as fill the GPU: it costs about
// what the forward pass costs, not several times more. (The first model capped
// the split and predicted these 3-8.6x too slow on P100 and V100: docs/cost-model.md.)
TEST(AnalyticModel, BackwardFilterOfSmallWeightLayersIsNotCappedBySmCount) {
  for (const char* name : {"p100", "v100", "k40"}) {
    const Device device = device_or_die(name);
    for (const TaskShape& layer : {conv_task(TaskKind::FP, 256, 56, 64, 1, 1, 0),   // 1x1, 16K weights
                                   conv_task(TaskKind::FP, 3, 224, 64, 7, 2, 3),    // stem, 9.4K weights
                                   conv_task(TaskKind::FP, 64, 56, 64, 1, 1, 0)}) { // 1x1, 4K weights
      TaskShape filter = layer;
      filter.kind = TaskKind::BP2;
      const double forward = fastest_ms(device, layer, 64, MathMode::fp32);
      const double backward_filter = fastest_ms(device, filter, 64, MathMode::fp32);
      EXPECT_LT(backward_filter, 2.0 * forward) << name << " " << task_signature(filter);
    }
  }
}

// The efficiency of a kernel family comes from the device's architecture
// table: the same GPU figures with another generation's table give other times.
TEST(AnalyticModel, EfficienciesComeFromTheArchitectureTable) {
  Device device = device_or_die("titanx");
  const TaskShape vgg = conv_task(TaskKind::FP, 256, 56, 256, 3, 1, 1);
  const double maxwell = option_ms(device, vgg, 32, MathMode::fp32, "implicit_precomp_gemm");
  ArchEfficiency slower = device.arch;
  slower.conv[static_cast<int>(ConvFamily::implicit_precomp_gemm)][0] /= 2;
  device.arch = slower;
  const double halved = option_ms(device, vgg, 32, MathMode::fp32, "implicit_precomp_gemm");
  EXPECT_NEAR(halved / maxwell, 2.0, 0.1);  // compute bound: twice the time at half the efficiency
  // The K40's Kepler table is not the Titan X's Maxwell table scaled by peak FLOP/s.
  const Device k40 = device_or_die("k40");
  const Device titanx = device_or_die("titanx");
  EXPECT_EQ(k40.arch.name, "kepler");
  EXPECT_NE(k40.arch.conv_efficiency(ConvFamily::winograd, ConvDirection::forward),
            titanx.arch.conv_efficiency(ConvFamily::winograd, ConvDirection::forward));
}

// TF32 runs the GEMM-like conv kernels and linear layers on tensor cores;
// FFT and Winograd stay on FP32 cores; a GPU without a mode refuses it.
TEST(AnalyticModel, TensorCoresPriceGemmKernelsInTheirMathMode) {
  const Device a100 = device_or_die("a100-80gb");
  const TaskShape vgg = conv_task(TaskKind::FP, 256, 56, 256, 3, 1, 1);
  const double fp32 = option_ms(a100, vgg, 64, MathMode::fp32, "implicit_precomp_gemm");
  const double tf32 = option_ms(a100, vgg, 64, MathMode::tf32, "implicit_precomp_gemm");
  EXPECT_LT(tf32 * 2, fp32);  // 156 against 19.5 TFLOP/s peak
  EXPECT_DOUBLE_EQ(option_ms(a100, vgg, 64, MathMode::fp32, "winograd_nonfused"),
                   option_ms(a100, vgg, 64, MathMode::tf32, "winograd_nonfused"));
  // In TF32 the fastest algorithm of a 3x3 layer is a tensor-core GEMM, not Winograd.
  EXPECT_EQ(analytic_options(a100, vgg, 64, MathMode::tf32).front().algorithm.find("winograd"), std::string::npos);
  TaskShape fc;
  fc.op = Op::linear;
  fc.kind = TaskKind::FP;
  fc.inputs = {Shape{{4096}}};
  fc.output = Shape{{4096}};
  fc.out = 4096;
  EXPECT_LT(fastest_ms(a100, fc, 256, MathMode::tf32) * 2, fastest_ms(a100, fc, 256, MathMode::fp32));
  // FP16 on Volta; a 16-bit task's operands are half the bytes, so memory-bound ops are faster too.
  const Device v100 = device_or_die("v100");
  EXPECT_LT(fastest_ms(v100, vgg, 64, MathMode::fp16), fastest_ms(v100, vgg, 64, MathMode::fp32));
  TaskShape relu;
  relu.op = Op::relu;
  relu.kind = TaskKind::FP;
  relu.inputs = {Shape{{256, 56, 56}}};
  relu.output = Shape{{256, 56, 56}};
  const double relu32 = fastest_ms(v100, relu, 64, MathMode::fp32);
  EXPECT_DOUBLE_EQ(fastest_ms(v100, relu, 64, MathMode::fp16), relu32);  // its float32 bytes, whatever the math
  relu.dtype = DataType::float16;
  EXPECT_LT(fastest_ms(v100, relu, 64, MathMode::fp16), 0.6 * relu32);
  // A mode the device lacks is refused; the default is the device's.
  EXPECT_FALSE(check_math_mode(v100, MathMode::tf32).ok());
  EXPECT_NE(check_math_mode(v100, MathMode::tf32).error().message.find("fp32, fp16"), std::string::npos);
  EXPECT_TRUE(check_math_mode(a100, MathMode::bf16).ok());
  EXPECT_EQ(AnalyticCostModel(a100).math_mode(), MathMode::tf32);
  EXPECT_EQ(AnalyticCostModel(a100, MathMode::fp32).math_mode(), MathMode::fp32);
  EXPECT_EQ(AnalyticCostModel(v100).math_mode(), MathMode::fp32);
}

TEST(AnalyticModel, SaysWhatKindOfModelItIsAndItsExpectedError) {
  const AnalyticCostModel k40(device_or_die("k40"));
  const CostModelInfo info = k40.info();
  EXPECT_EQ(info.kind, "analytic");
  EXPECT_EQ(info.math_mode, "fp32");
  EXPECT_NE(info.expected_error.find("kepler"), std::string::npos) << info.expected_error;
  EXPECT_NE(info.expected_error.find("median"), std::string::npos) << info.expected_error;
  // Hopper's table is fitted on the H100's own FP32 kernel times: its expected
  // error is their held-out figure, and says it covers FP32 only (the default
  // math is TF32, whose tensor-core values are not measured).
  const AnalyticCostModel h100(device_or_die("h100"));
  const std::string& h100_error = h100.info().expected_error;
  EXPECT_EQ(h100.info().math_mode, "tf32");
  EXPECT_EQ(h100_error.find("unknown"), std::string::npos) << h100_error;
  for (const char* wanted : {"hopper", "conv tasks median", "on h100", "math fp32 only"})
    EXPECT_NE(h100_error.find(wanted), std::string::npos) << wanted << " in " << h100_error;
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
