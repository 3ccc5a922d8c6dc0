#pragma once
// The work of one GPU kernel (or one phase of an algorithm) and the time the
// analytic model gives it: a roofline (compute or memory bound, whichever is
// slower) with a utilisation that falls when there is too little parallel
// work to fill the device, plus a fixed launch cost per kernel.
//
// Every quantity is affine in the sub-batch b (flops = a*b + c with c >= 0,
// and the same for bytes) and the parallel work is non-decreasing in b, so the
// time per sample, time(b)/b, never increases with b: small sub-batches are
// slower per sample, which is what keeps the planner from sub-batch 1.

#include "profiler/device.h"

namespace mplan {

struct KernelWork {
  double flops = 0;               // arithmetic, FP32 operations
  double bytes = 0;               // device-memory traffic, read + written
  double parallel_items = 1;      // independent output elements (how much work fills the GPU)
  double compute_efficiency = 1;  // fraction of peak FLOP/s the kernel reaches when the GPU is full
  int kernels = 1;                // launches
};

// Fraction of memory bandwidth streaming kernels reach (STREAM-like copies
// reach ~80% on every GPU of examples/devices).
inline constexpr double kMemoryEfficiency = 0.8;

// Time of one piece of work on a device, in milliseconds.
double kernel_time_ms(const Device& device, const KernelWork& work);

// The utilisation curve: items / (items + half), where `half` is the work
// that fills half the device (a few CTA tiles per SM).
double utilisation(const Device& device, double parallel_items);

}  // namespace mplan
