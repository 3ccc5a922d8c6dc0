// The CUDA backend's convolutions against the CPU backend's direct kernels:
// every direction, every cuDNN algorithm that supports the shape (each with
// the workspace cuDNN asks for), bias, groups, stride and padding, filter
// gradients accumulating (beta = 1; the graph API's through scratch),
// micro-batches of different algorithms, and the fallback when the planned
// workspace is too small.

#include <cstdio>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cuda/conv.h"
#include "tests/gpu/gpu_test_util.h"

namespace mplan::gpu_test {
namespace {

using rt::ConvAlgoId;
using rt::ConvDirection;
using rt::ConvShape;

// ConvShape{n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups}
const ConvShape kShapes[] = {
    {3, 4, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1},    // 3x3, "same" padding: winograd's case
    {2, 6, 11, 10, 4, 5, 5, 2, 2, 2, 2, 2},  // 5x5, stride 2, two groups
    {4, 8, 7, 7, 16, 1, 1, 1, 1, 0, 0, 1},   // 1x1
    {2, 6, 8, 8, 6, 3, 3, 1, 1, 1, 1, 6},    // depthwise
};

std::string describe(const ConvShape& s) {
  char text[160];
  std::snprintf(text, sizeof text, "n=%lld c=%lld %lldx%lld k=%lld %lldx%lld stride %lld pad %lld groups %lld",
                static_cast<long long>(s.n), static_cast<long long>(s.c), static_cast<long long>(s.h),
                static_cast<long long>(s.w), static_cast<long long>(s.k), static_cast<long long>(s.r),
                static_cast<long long>(s.s), static_cast<long long>(s.stride_h), static_cast<long long>(s.pad_h),
                static_cast<long long>(s.groups));
  return text;
}

struct ConvData {
  std::vector<float> x, w, bias, dy;
  explicit ConvData(const ConvShape& s)
      : x(random_floats(s.x_elements(), 1)),
        w(random_floats(s.w_elements(), 2)),
        bias(random_floats(s.k, 3)),
        dy(random_floats(s.y_elements(), 4)) {}
};

// Runs `run(algo, workspace, bytes)` for every algorithm cuDNN gives a
// workspace size for, the graph API's configurations included; returns how
// many ran, and in *graph_ran how many of those were graph configurations. A
// run that cuDNN refused at run time (the backend ran another algorithm) is
// reported, not counted.
template <typename Run>
int for_each_algorithm(ConvDirection direction, const ConvShape& shape, Run run, int* graph_ran = nullptr) {
  const rt::Context inline_context;
  int ran = 0;
  for (ConvAlgoId algo : rt::conv_algorithm_ids(direction)) {  // the graph API's configurations too
    const int64_t bytes = rt::conv_workspace_bytes(inline_context, direction, shape, algo);
    if (bytes < 0) continue;
    DeviceBuffer workspace(static_cast<size_t>(bytes));
    const int64_t fallbacks = rt::cuda::conv_fallback_count();
    SCOPED_TRACE(std::string(rt::conv_algorithm_name(direction, algo)) + " on " + describe(shape));
    run(algo, bytes > 0 ? workspace.bytes() : nullptr, bytes);
    if (rt::cuda::conv_fallback_count() != fallbacks) {
      std::printf("note: cuDNN refused %s at run time for %s\n", rt::conv_algorithm_name(direction, algo),
                  describe(shape).c_str());
      continue;
    }
    ++ran;
    if (graph_ran != nullptr && rt::graph_algorithm_rank(algo) >= 0) ++*graph_ran;
  }
  return ran;
}

// The shapes the graph API must run (runtime/cuda/conv_graph.h): an ordinary
// 3x3 and a 1x1 convolution, ungrouped. Were none of its configurations to
// run, every graph_<r> of a profile would silently be a legacy algorithm.
bool graph_must_run(const ConvShape& s) { return s.groups == 1 && s.stride_h == 1; }

TEST(GpuConv, ForwardEveryAlgorithmMatchesCpu) {
  MPLAN_REQUIRE_GPU();
  for (const ConvShape& s : kShapes) {
    const ConvData d(s);
    std::vector<float> expected(s.y_elements());
    rt::cpu::conv_forward(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.w.data(), d.bias.data(), expected.data(),
                          nullptr, 0);
    const DeviceBuffer x(d.x), w(d.w), bias(d.bias);
    DeviceBuffer y(expected.size() * sizeof(float));
    int graph_ran = 0;
    const int ran = for_each_algorithm(
        ConvDirection::forward, s,
        [&](ConvAlgoId algo, void* ws, int64_t bytes) {
          rt::conv_forward(rt::Context{}, s, algo, x.f32(), w.f32(), bias.f32(), y.f32(), ws, bytes);
          EXPECT_TRUE(close(y.download(expected.size()), expected));
        },
        &graph_ran);
    EXPECT_GE(ran, 1) << describe(s);  // implicit_gemm runs every shape
    if (graph_must_run(s)) {
      EXPECT_GE(graph_ran, 1) << "no graph-API configuration ran " << describe(s);
    }
  }
}

TEST(GpuConv, BackwardDataEveryAlgorithmWritesAndAccumulates) {
  MPLAN_REQUIRE_GPU();
  for (const ConvShape& s : kShapes) {
    const ConvData d(s);
    const std::vector<float> prior = random_floats(s.x_elements(), 5);
    for (bool accumulate : {false, true}) {
      std::vector<float> expected = prior;
      rt::cpu::conv_backward_data(rt::cpu::ConvAlgo::direct, s, d.w.data(), d.dy.data(), expected.data(), nullptr, 0,
                                  accumulate);
      const DeviceBuffer w(d.w), dy(d.dy);
      int graph_ran = 0;
      const int ran = for_each_algorithm(
          ConvDirection::backward_data, s,
          [&](ConvAlgoId algo, void* ws, int64_t bytes) {
            DeviceBuffer dx(prior);
            rt::conv_backward_data(rt::Context{}, s, algo, w.f32(), dy.f32(), dx.f32(), ws, bytes, accumulate);
            EXPECT_TRUE(close(dx.download(expected.size()), expected)) << "accumulate " << accumulate;
          },
          &graph_ran);
      EXPECT_GE(ran, 1) << describe(s);
      if (graph_must_run(s)) {
        EXPECT_GE(graph_ran, 1) << "no graph-API configuration ran " << describe(s) << ", accumulate " << accumulate;
      }
    }
  }
}

TEST(GpuConv, BackwardFilterEveryAlgorithmAccumulates) {
  MPLAN_REQUIRE_GPU();
  for (const ConvShape& s : kShapes) {
    const ConvData d(s);
    const std::vector<float> prior = random_floats(s.w_elements(), 6);
    std::vector<float> expected = prior;  // dw += (ops.h: weight gradients always accumulate)
    rt::cpu::conv_backward_filter(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.dy.data(), expected.data(), nullptr, 0,
                                  true);
    const DeviceBuffer x(d.x), dy(d.dy);
    int graph_ran = 0;
    const int ran = for_each_algorithm(
        ConvDirection::backward_filter, s,
        [&](ConvAlgoId algo, void* ws, int64_t bytes) {
          DeviceBuffer dw(prior);
          rt::conv_backward_filter(rt::Context{}, s, algo, x.f32(), dy.f32(), dw.f32(), ws, bytes);
          EXPECT_TRUE(close(dw.download(expected.size()), expected));
        },
        &graph_ran);
    EXPECT_GE(ran, 1) << describe(s);
    if (graph_must_run(s)) {
      EXPECT_GE(graph_ran, 1) << "no graph-API configuration ran " << describe(s);
    }
  }
}

// A graph-API filter gradient writes into scratch after its engine's
// workspace and adds it to dw (runtime/cuda/conv_graph.h): the workspace it
// asks for includes that scratch, and one byte less is refused (the legacy
// path then runs, counted as a fallback) with dw still right.
TEST(GpuConv, GraphFilterGradientNeedsItsScratch) {
  MPLAN_REQUIRE_GPU();
  const ConvShape& s = kShapes[0];
  const ConvData d(s);
  const std::vector<float> prior = random_floats(s.w_elements(), 6);
  std::vector<float> expected = prior;
  rt::cpu::conv_backward_filter(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.dy.data(), expected.data(), nullptr, 0,
                                true);
  const DeviceBuffer x(d.x), dy(d.dy);
  const rt::Context inline_context;
  int checked = 0;
  for (ConvAlgoId algo : rt::conv_algorithm_ids(ConvDirection::backward_filter)) {
    if (rt::graph_algorithm_rank(algo) < 0) continue;
    const int64_t bytes = rt::conv_workspace_bytes(inline_context, ConvDirection::backward_filter, s, algo);
    if (bytes < 0) continue;
    SCOPED_TRACE(rt::conv_algorithm_name(ConvDirection::backward_filter, algo));
    EXPECT_GE(bytes, s.w_elements() * static_cast<int64_t>(sizeof(float)));
    DeviceBuffer workspace(static_cast<size_t>(bytes));
    DeviceBuffer dw(prior);
    const int64_t fallbacks = rt::cuda::conv_fallback_count();
    rt::conv_backward_filter(rt::Context{}, s, algo, x.f32(), dy.f32(), dw.f32(), workspace.bytes(), bytes - 1);
    EXPECT_EQ(rt::cuda::conv_fallback_count(), fallbacks + 1) << "ran with one byte less than it asked for";
    EXPECT_TRUE(close(dw.download(expected.size()), expected));
    ++checked;
  }
  EXPECT_GE(checked, 1) << "no graph-API filter-gradient configuration for " << describe(s);
}

TEST(GpuConv, BackwardBiasAccumulates) {
  MPLAN_REQUIRE_GPU();
  for (const ConvShape& s : kShapes) {
    const ConvData d(s);
    std::vector<float> expected = random_floats(s.k, 7);
    const DeviceBuffer dy(d.dy);
    DeviceBuffer dbias(expected);
    rt::cpu::conv_backward_bias(s, d.dy.data(), expected.data(), true);
    rt::conv_backward_bias(rt::Context{}, s, dy.f32(), dbias.f32());
    EXPECT_TRUE(close(dbias.download(expected.size()), expected)) << describe(s);
  }
}

// Two algorithms that both run the shape's slices of n1 and n2 images, and the
// workspace the larger needs.
struct MicroPlan {
  rt::ConvMicroBatch items[2];
  int64_t workspace_bytes = 0;
};
MicroPlan micro_plan(ConvDirection direction, const ConvShape& s, int64_t n1) {
  MicroPlan plan;
  ConvShape a = s, b = s;
  a.n = n1;
  b.n = s.n - n1;
  const rt::Context inline_context;
  ConvAlgoId second = 0;  // the last algorithm, other than the first, that runs both slices
  for (ConvAlgoId algo = 1; algo < rt::conv_algorithm_count(direction); ++algo)
    if (rt::conv_workspace_bytes(inline_context, direction, a, algo) >= 0 &&
        rt::conv_workspace_bytes(inline_context, direction, b, algo) >= 0)
      second = algo;
  plan.items[0] = {n1, 0};
  plan.items[1] = {s.n - n1, second};
  plan.workspace_bytes = std::max(rt::conv_workspace_bytes(inline_context, direction, a, 0),
                                  rt::conv_workspace_bytes(inline_context, direction, b, second));
  return plan;
}

TEST(GpuConv, MicroBatchesOfTwoAlgorithmsEqualTheWholeBatch) {
  MPLAN_REQUIRE_GPU();
  ConvShape s = kShapes[0];
  s.n = 5;
  const ConvData d(s);
  const rt::Context inline_context;
  const DeviceBuffer x(d.x), w(d.w), bias(d.bias), dy(d.dy);
  {  // forward
    std::vector<float> expected(s.y_elements());
    rt::cpu::conv_forward(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.w.data(), d.bias.data(), expected.data(),
                          nullptr, 0);
    const MicroPlan plan = micro_plan(ConvDirection::forward, s, 2);
    DeviceBuffer ws(plan.workspace_bytes), y(expected.size() * sizeof(float));
    rt::conv_forward_micro(inline_context, s, rt::MicroBatches{plan.items, 2}, x.f32(), w.f32(), bias.f32(), y.f32(),
                           ws.bytes(), plan.workspace_bytes);
    EXPECT_TRUE(close(y.download(expected.size()), expected)) << "forward, second algorithm "
                                                               << plan.items[1].algo;
  }
  {  // backward data, accumulating into a prior dx
    std::vector<float> expected = random_floats(s.x_elements(), 8);
    DeviceBuffer dx(expected);
    rt::cpu::conv_backward_data(rt::cpu::ConvAlgo::direct, s, d.w.data(), d.dy.data(), expected.data(), nullptr, 0,
                                true);
    const MicroPlan plan = micro_plan(ConvDirection::backward_data, s, 3);
    DeviceBuffer ws(plan.workspace_bytes);
    rt::conv_backward_data_micro(inline_context, s, rt::MicroBatches{plan.items, 2}, w.f32(), dy.f32(), dx.f32(),
                                 ws.bytes(), plan.workspace_bytes, true);
    EXPECT_TRUE(close(dx.download(expected.size()), expected)) << "backward data, second algorithm "
                                                                << plan.items[1].algo;
  }
  {  // backward filter: the slices sum into dw
    std::vector<float> expected = random_floats(s.w_elements(), 9);
    DeviceBuffer dw(expected);
    rt::cpu::conv_backward_filter(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.dy.data(), expected.data(), nullptr, 0,
                                  true);
    const MicroPlan plan = micro_plan(ConvDirection::backward_filter, s, 1);
    DeviceBuffer ws(plan.workspace_bytes);
    rt::conv_backward_filter_micro(inline_context, s, rt::MicroBatches{plan.items, 2}, x.f32(), dy.f32(), dw.f32(),
                                   ws.bytes(), plan.workspace_bytes);
    EXPECT_TRUE(close(dw.download(expected.size()), expected)) << "backward filter, second algorithm "
                                                                << plan.items[1].algo;
  }
}

TEST(GpuConv, TooSmallWorkspaceRunsAnAlgorithmThatFitsAndCountsIt) {
  MPLAN_REQUIRE_GPU();
  const ConvShape s = kShapes[0];
  const rt::Context inline_context;
  ConvAlgoId hungry = -1;  // an algorithm that needs workspace for this shape
  for (ConvAlgoId algo = 0; algo < rt::conv_algorithm_count(ConvDirection::forward) && hungry < 0; ++algo)
    if (rt::conv_workspace_bytes(inline_context, ConvDirection::forward, s, algo) > 0) hungry = algo;
  if (hungry < 0) GTEST_SKIP() << "no forward algorithm needs workspace for " << describe(s) << " on this GPU";
  const ConvData d(s);
  std::vector<float> expected(s.y_elements());
  rt::cpu::conv_forward(rt::cpu::ConvAlgo::direct, s, d.x.data(), d.w.data(), nullptr, expected.data(), nullptr, 0);
  const DeviceBuffer x(d.x), w(d.w);
  DeviceBuffer y(expected.size() * sizeof(float));
  const int64_t fallbacks = rt::cuda::conv_fallback_count();
  rt::conv_forward(inline_context, s, hungry, x.f32(), w.f32(), nullptr, y.f32(), nullptr, 0);
  EXPECT_EQ(rt::cuda::conv_fallback_count(), fallbacks + 1);
  EXPECT_TRUE(close(y.download(expected.size()), expected));
}

// No GPU needed: the algorithm lists are cuDNN's enums, named as
// profiler/conv_algorithms.cpp names them.
TEST(GpuConv, AlgorithmNamesAreCudnnEnumNames) {
  const std::vector<std::string> forward = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                            "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  const std::vector<std::string> data = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  const std::vector<std::string> filter = {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused",
                                           "fft_tiling"};
  const std::pair<ConvDirection, const std::vector<std::string>*> lists[] = {
      {ConvDirection::forward, &forward}, {ConvDirection::backward_data, &data},
      {ConvDirection::backward_filter, &filter}};
  for (const auto& [direction, names] : lists) {
    ASSERT_EQ(rt::conv_algorithm_count(direction), static_cast<int>(names->size()));
    for (size_t i = 0; i < names->size(); ++i)
      EXPECT_EQ(rt::conv_algorithm_name(direction, static_cast<ConvAlgoId>(i)), (*names)[i]);
    EXPECT_STREQ(rt::conv_algorithm_name(direction, static_cast<ConvAlgoId>(names->size())), "unknown");
    EXPECT_STREQ(rt::conv_algorithm_name(direction, -1), "unknown");
  }
}

}  // namespace
}  // namespace mplan::gpu_test
