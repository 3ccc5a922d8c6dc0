// The host and device sides of a kernel's time (profiler/kernel_work.h,
// KernelCost; docs/cost-model.md, "Host and device"): a program that keeps
// its stream busy pays the longer side of each task, a task timed alone from
// an idle stream pays both.

#include <gtest/gtest.h>


#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/kernel_work.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

using test::device_or_die;

// A K40 whose launch splits at 1 us and whose 20 us cuDNN call overhead is all
// the host's.
Device split_k40() {
  Device device = device_or_die("k40");
  device.arch.conv_call_overhead_us = 20;
  device.arch.host_overhead_us = 20;
  device.arch.kernel_gap_us = 1;
  return device;
}

// A streaming kernel of `bytes`, one launch; a cuDNN call's first kernel if `cudnn`.
KernelWork streaming(double bytes, bool cudnn = false) {
  KernelWork w{0, bytes, bytes / 4, 1.0, 1};
  if (cudnn) {
    w.kind = KernelClass::conv;
    w.family = ConvFamily::implicit_precomp_gemm;
    w.cudnn = KernelWork::Cudnn::first_kernel;
  }
  return w;
}

// The forward of a 3x3 convolution, stride 1, padded: `channels` in and out
// over hw x hw.
TaskShape same_conv(int64_t channels, int64_t hw) {
  TaskShape s;
  s.op = Op::conv;
  s.kind = TaskKind::FP;
  s.inputs = {Shape{{channels, hw, hw}}};
  s.output = Shape{{channels, hw, hw}};
  s.out = channels;
  s.window = Window{3, 3, 1, 1, 1, 1};
  return s;
}

TEST(HostAndDevice, TheLaunchSplitsAtTheKernelGapAndTheSidesAddUpToTheIdleTime) {
  Device device = split_k40();
  const KernelWork w = streaming(1e6, /*cudnn=*/true);
  const KernelCost cost = kernel_cost(device, w);
  Device no_fixed = device;
  no_fixed.launch_latency_ms = 0;
  no_fixed.arch.conv_call_overhead_us = 0;
  no_fixed.arch.host_overhead_us = 0;
  no_fixed.arch.kernel_gap_us = 0;
  const double work_ms = kernel_cost(no_fixed, w).device_ms;
  EXPECT_GT(work_ms, 0);
  // The device: the work and the gap; the host: the rest of the launch and the call.
  EXPECT_NEAR(cost.device_ms, work_ms + 0.001, 1e-12);
  EXPECT_NEAR(cost.host_ms, device.launch_latency_ms - 0.001 + 0.020, 1e-12);
  EXPECT_DOUBLE_EQ(kernel_time_ms(device, w), cost.device_ms + cost.host_ms);
  EXPECT_DOUBLE_EQ(stream_time_ms(cost, StreamState::idle), cost.device_ms + cost.host_ms);
  EXPECT_DOUBLE_EQ(stream_time_ms(cost, StreamState::busy), std::max(cost.device_ms, cost.host_ms));
  // A gap above the launch is held to the launch: the host never gets a negative share.
  device.arch.kernel_gap_us = 1000;
  EXPECT_NEAR(kernel_cost(device, w).host_ms, 0.020, 1e-12);
}

TEST(HostAndDevice, ATableWithoutTheSharesPutsEveryFixedCostOnTheDevice) {
  Device device = device_or_die("k40");
  device.arch.kernel_gap_us = -1;
  device.arch.host_overhead_us = 0;
  device.arch.conv_call_overhead_us = 20;
  const KernelCost cost = kernel_cost(device, streaming(4096, /*cudnn=*/true));
  Device no_fixed = device;
  no_fixed.launch_latency_ms = 0;
  no_fixed.arch.conv_call_overhead_us = 0;
  EXPECT_NEAR(cost.device_ms,
              kernel_cost(no_fixed, streaming(4096, true)).device_ms + device.launch_latency_ms + 0.020, 1e-12);
  EXPECT_DOUBLE_EQ(cost.host_ms, 0);
  // ... so a busy stream and an idle one agree (Hopper's table, fitted on
  // kernel times from an idle stream).
  EXPECT_DOUBLE_EQ(stream_time_ms(cost, StreamState::busy), stream_time_ms(cost, StreamState::idle));
  const Device h100 = device_or_die("h100");
  const TaskShape conv = same_conv(8, 4);
  const auto busy = analytic_options(h100, conv, 1, MathMode::fp32);
  const auto idle = analytic_options(h100, conv, 1, MathMode::fp32, StreamState::idle);
  ASSERT_EQ(busy.size(), idle.size());
  for (size_t i = 0; i < busy.size(); ++i) {
    EXPECT_EQ(busy[i].algorithm, idle[i].algorithm);
    EXPECT_DOUBLE_EQ(busy[i].time_ms, idle[i].time_ms) << busy[i].algorithm;
  }
}

// An overhead beyond the table's host share is device work (a family's own
// kernels: cuDNN 9's precomputed GEMM on a pointwise layer): a busy stream
// cannot hide it.
TEST(HostAndDevice, AnOverheadBeyondTheHostShareIsDeviceWork) {
  Device device = split_k40();
  const KernelWork w = streaming(1e6, /*cudnn=*/true);
  const KernelCost base = kernel_cost(device, w);
  device.arch.family_call_overhead_us[static_cast<int>(ConvFamily::implicit_precomp_gemm)][0] = 150;
  const KernelCost costly = kernel_cost(device, w);
  EXPECT_NEAR(costly.device_ms - base.device_ms, 0.130, 1e-12);
  EXPECT_DOUBLE_EQ(costly.host_ms, base.host_ms);
  // One below the host share is host work, all of it.
  device.arch.family_call_overhead_us[static_cast<int>(ConvFamily::implicit_precomp_gemm)][0] = 8;
  const KernelCost cheap = kernel_cost(device, w);
  EXPECT_DOUBLE_EQ(cheap.device_ms, base.device_ms);
  EXPECT_NEAR(base.host_ms - cheap.host_ms, 0.012, 1e-12);
}

// The planner's times are a busy stream's: a tiny task costs its host work,
// a large one its device work, and neither pays both (kernel profiler's idle
// stream: both). The shipped Volta table puts its 18 us call on the host.
TEST(HostAndDevice, ThePlannersTimesAreABusyStreamsAndTheProfilersAnIdleOnes) {
  const Device device = device_or_die("v100");
  ASSERT_GE(device.arch.kernel_gap_us, 0);
  const TaskShape tiny = same_conv(8, 4);
  const TaskShape large = same_conv(256, 56);
  for (const TaskShape* shape : {&tiny, &large}) {
    const auto busy = analytic_options(device, *shape, 32, MathMode::fp32);
    const auto idle = analytic_options(device, *shape, 32, MathMode::fp32, StreamState::idle);
    ASSERT_EQ(busy.size(), idle.size());
    for (const TaskOption& b : busy)
      for (const TaskOption& i : idle)
        if (b.algorithm == i.algorithm) {
          EXPECT_LT(b.time_ms, i.time_ms) << b.algorithm;
        }
  }
  // The tiny layer's fastest option on a busy stream is host-bound: a larger
  // sub-batch costs it nothing more.
  const double at_1 = analytic_options(device, tiny, 1, MathMode::fp32).front().time_ms;
  const double at_2 = analytic_options(device, tiny, 2, MathMode::fp32).front().time_ms;
  EXPECT_DOUBLE_EQ(at_1, at_2);
  const double idle_1 = analytic_options(device, tiny, 1, MathMode::fp32, StreamState::idle).front().time_ms;
  EXPECT_GT(idle_1, at_1);
  // The large one is device-bound: on a busy stream its fastest option costs
  // its device work, and the same option timed alone adds a sliver of host work.
  const TaskOption large_busy = analytic_options(device, large, 32, MathMode::fp32).front();
  double large_idle = 0;
  for (const TaskOption& o : analytic_options(device, large, 32, MathMode::fp32, StreamState::idle))
    if (o.algorithm == large_busy.algorithm) large_idle = o.time_ms;
  EXPECT_GT(large_busy.time_ms, 1.0);
  EXPECT_GT(large_idle, large_busy.time_ms);
  EXPECT_LT(large_idle - large_busy.time_ms, 0.03 * large_busy.time_ms);
}

}  // namespace
}  // namespace mplan
