#include "profiler/kernel_work.h"

#include <algorithm>
#include <cmath>

namespace mplan {

namespace {
// Bytes a streaming kernel must move before the latency of its first loads is
// hidden, per SM (the fixed cost of a small memory-bound kernel).
constexpr double kHalfBytesPerSm = 32 * 1024;

bool tensor_eligible(const KernelWork& work) {
  return work.kind == KernelClass::linear_gemm ||
         (work.kind == KernelClass::conv && conv_family_uses_tensor_cores(work.family));
}

// The fraction of a GEMM tile's time spent on its reduction: the tile's fixed
// cost (operand pipeline fill, epilogue) is worth `half` reduction steps.
double tile_amortisation(const ArchEfficiency& arch, const KernelWork& work) {
  if (work.kind != KernelClass::conv || work.reduction_length <= 0) return 1.0;
  const double half = arch.reduction_half(work.family);
  return half > 0 ? work.reduction_length / (work.reduction_length + half) : 1.0;
}

double base_efficiency(const Device& device, const KernelWork& work, MathMode math, double& peak_flops) {
  const ArchEfficiency& arch = device.arch;
  peak_flops = device.peak_fp32_flops;
  if (math != MathMode::fp32 && device.has_math(math) && tensor_eligible(work)) {
    peak_flops = device.peak_flops(math);
    const double tensor = arch.tensor_efficiency(math);
    if (work.kind == KernelClass::linear_gemm) return tensor;
    // Backward directions lose against forward as the FP32 GEMM kernels do.
    const double fwd = arch.conv_efficiency(ConvFamily::implicit_precomp_gemm, ConvDirection::forward);
    const double dir = arch.conv_efficiency(ConvFamily::implicit_precomp_gemm, work.direction);
    return tensor * (fwd > 0 ? dir / fwd : 1.0);
  }
  switch (work.kind) {
    case KernelClass::fixed: return work.compute_efficiency;
    case KernelClass::conv:
      return arch.conv_efficiency(work.family, work.direction) *
             (work.pointwise ? arch.pointwise_factor(work.family, work.direction) : 1.0);
    case KernelClass::transform: return arch.fft_transform;
    case KernelClass::linear_gemm: return arch.linear_gemm;
  }
  return work.compute_efficiency;
}

}  // namespace

KernelWork effective_work(const ArchEfficiency& arch, const KernelWork& work) {
  if (work.kind != KernelClass::conv || work.filter_reduction <= 0) return work;
  const double chunk = arch.filter_chunk(work.family);
  if (chunk <= 0) return work;
  KernelWork split = work;
  split.parallel_items = work.filter_elements * std::ceil(work.filter_reduction / chunk);
  split.reduction_length = std::min(work.filter_reduction, chunk);
  return split;
}

double utilisation(const Device& device, double parallel_items) {
  const double half = device.arch.half_items_per_sm * device.sm_count;
  const double items = std::max(parallel_items, 1.0);
  return items / (items + half);
}

double work_efficiency(const Device& device, const KernelWork& work, MathMode math, double& peak_flops) {
  return base_efficiency(device, work, math, peak_flops) * tile_amortisation(device.arch, effective_work(device.arch, work));
}

KernelCost kernel_cost(const Device& device, const KernelWork& work, MathMode math) {
  double compute_s = 0;
  if (work.flops > 0) {
    double peak = 0;
    const double efficiency = work_efficiency(device, work, math, peak);
    compute_s = work.flops / (peak * efficiency * utilisation(device, effective_work(device.arch, work).parallel_items));
  }
  double memory_s = 0;
  if (work.bytes > 0) {
    const double bytes = work.bytes_in_math_operands ? work.bytes * math_operand_bytes(math) / 4.0 : work.bytes;
    memory_s = (bytes + kHalfBytesPerSm * device.sm_count) /
               (device.memory_bandwidth_bytes_per_s * device.arch.memory_efficiency);
  }
  double overhead_us = 0;
  if (work.cudnn == KernelWork::Cudnn::first_kernel)
    overhead_us = device.arch.call_overhead_us(work.family, work.direction, work.pointwise);
  if (work.cudnn == KernelWork::Cudnn::further_kernel) overhead_us = device.arch.kernel_overhead_us();
  const double gap_ms = device.arch.kernel_gap_us < 0
                            ? device.launch_latency_ms
                            : std::min(device.arch.kernel_gap_us / 1000.0, device.launch_latency_ms);
  // The host's share of the overhead is at most the table's
  // host_overhead_us; beyond it, the overhead is device work (a family's own
  // kernels: cuDNN 9's precomputed GEMM on a pointwise layer).
  const double host_us = std::min(overhead_us, device.arch.host_overhead_us);
  const double repeats = static_cast<double>(work.repeats);
  KernelCost cost;
  cost.device_ms =
      repeats * (work.kernels * gap_ms + (overhead_us - host_us) / 1000.0 + std::max(compute_s, memory_s) * 1000.0);
  cost.host_ms = repeats * (work.kernels * (device.launch_latency_ms - gap_ms) + host_us / 1000.0);
  return cost;
}

double kernel_time_ms(const Device& device, const KernelWork& work, MathMode math) {
  const KernelCost cost = kernel_cost(device, work, math);
  return cost.device_ms + cost.host_ms;
}

KernelCost phases_cost(const Device& device, const std::vector<KernelWork>& phases, MathMode math) {
  KernelCost total;
  for (const KernelWork& phase : phases) {
    const KernelCost cost = kernel_cost(device, phase, math);
    total.device_ms += cost.device_ms;
    total.host_ms += cost.host_ms;
  }
  return total;
}

double stream_time_ms(const KernelCost& cost, StreamState stream) {
  return stream == StreamState::busy ? std::max(cost.device_ms, cost.host_ms) : cost.device_ms + cost.host_ms;
}

}  // namespace mplan
