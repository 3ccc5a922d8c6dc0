#include "profiler/kernel_work.h"

#include <algorithm>

namespace mplan {

namespace {
// Output elements that fill half of one SM: two resident 128x64 CTA tiles of
// a cuDNN/cuBLAS GEMM kernel per SM; the half-saturation point of the curve.
constexpr double kHalfItemsPerSm = 8192;
// Bytes a streaming kernel must move before the latency of its first loads is
// hidden, per SM (the fixed cost of a small memory-bound kernel).
constexpr double kHalfBytesPerSm = 32 * 1024;
}  // namespace

double utilisation(const Device& device, double parallel_items) {
  const double half = kHalfItemsPerSm * device.sm_count;
  const double items = std::max(parallel_items, 1.0);
  return items / (items + half);
}

double kernel_time_ms(const Device& device, const KernelWork& work) {
  double compute_s = 0;
  if (work.flops > 0)
    compute_s = work.flops /
                (device.peak_fp32_flops * work.compute_efficiency * utilisation(device, work.parallel_items));
  double memory_s = 0;
  if (work.bytes > 0)
    memory_s = (work.bytes + kHalfBytesPerSm * device.sm_count) /
               (device.memory_bandwidth_bytes_per_s * kMemoryEfficiency);
  return work.kernels * device.launch_latency_ms + std::max(compute_s, memory_s) * 1000.0;
}

}  // namespace mplan
