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
//
// How fast the arithmetic runs comes from the device's architecture table
// (profiler/arch_efficiency.h) by the kind of kernel, so that the work of an
// algorithm is the same on every GPU and only the table differs.

#include <vector>

#include "profiler/arch_efficiency.h"
#include "profiler/device.h"
#include "profiler/math_mode.h"

namespace mplan {

// Which efficiency of the architecture table a phase's arithmetic runs at.
enum class KernelClass {
  fixed,        // compute_efficiency as given (streaming kernels: 1, their flops are negligible)
  conv,         // a convolution family's arithmetic: arch.conv[family][direction]; tensor cores for GEMM families
  transform,    // FFT and Winograd transforms: arch.fft_transform
  linear_gemm,  // cuBLAS GEMM of a linear layer: arch.linear_gemm; tensor cores
};

struct KernelWork {
  double flops = 0;               // arithmetic, FP32 operations
  double bytes = 0;               // device-memory traffic, read + written
  double parallel_items = 1;      // independent output elements (how much work fills the GPU)
  double compute_efficiency = 1;  // KernelClass::fixed: fraction of peak FLOP/s on a full GPU
  int kernels = 1;                // launches
  // Identical launches of the whole piece of work, one after another (the
  // groups of a grouped convolution that cuDNN's transform algorithms loop
  // over): the time is repeats times one launch's.
  int64_t repeats = 1;
  KernelClass kind = KernelClass::fixed;
  ConvFamily family = ConvFamily::implicit_gemm;      // KernelClass::conv, and every kernel of a cuDNN call
  ConvDirection direction = ConvDirection::forward;   // likewise
  // A cuDNN kernel: the first of its call pays the architecture's
  // conv_call_overhead_us, a further one its kernel_overhead_us().
  enum class Cudnn { none, first_kernel, further_kernel };
  Cudnn cudnn = Cudnn::none;
  // KernelClass::conv of a GEMM family: the reduction one output tile sums
  // (arch reduction_half_length; 0: not a tiled GEMM). Never decreasing in
  // the sub-batch, so time per sample still never increases with b.
  double reduction_length = 0;
  // KernelClass::conv backward-filter of a GEMM family: the filter's
  // elements and the b*P*Q reduction that split-K divides (0 otherwise); with
  // the architecture's filter_reduction_chunk they replace parallel_items and
  // reduction_length (effective_work).
  double filter_elements = 0, filter_reduction = 0;
  // Every kernel of a GEMM family's call on a pointwise convolution (1x1,
  // stride 1, no padding): the arithmetic (KernelClass::conv) runs at the
  // architecture's pointwise factor, the call's first kernel pays its
  // pointwise call overhead.
  bool pointwise = false;
  // The bytes are counted at 4-byte operands and scale with the math mode's
  // operand size (a convolution's algorithms, profiler/conv_algorithms.h);
  // false: they are the task's own bytes (the op table's work, which counts
  // each block's storage type).
  bool bytes_in_math_operands = false;
};

// The work as the device's architecture runs it: a backward-filter GEMM
// kernel split at the architecture's filter_reduction_chunk of its family,
// where the table has one; otherwise the work as given.
KernelWork effective_work(const ArchEfficiency& arch, const KernelWork& work);

// Time of one piece of work on a device in a math mode, in milliseconds,
// timed alone from an idle stream: its device and host work (KernelCost,
// below) in series. Tensor-core modes apply to GEMM-like kernels (conv GEMM families, linear
// layers) of a device that has the mode; everything else runs on FP32 cores.
// 16-bit modes halve the bytes moved.
double kernel_time_ms(const Device& device, const KernelWork& work, MathMode math = MathMode::fp32);

// The two sides of a piece of work's time. The device's: the arithmetic or
// the memory traffic, whichever is slower, the architecture's kernel_gap_us
// per kernel, and any cuDNN overhead beyond the table's host_overhead_us. The
// host's: the rest of each launch and the cuDNN overhead up to
// host_overhead_us (descriptor checks, the call's own setup). kernel_time_ms
// is their sum.
struct KernelCost {
  double device_ms = 0;
  double host_ms = 0;
};
KernelCost kernel_cost(const Device& device, const KernelWork& work, MathMode math = MathMode::fp32);
KernelCost phases_cost(const Device& device, const std::vector<KernelWork>& phases, MathMode math = MathMode::fp32);

// How a task's calls meet the device.
//   idle: each task is timed alone from an idle stream (the kernel
//     profiler's events): the host's work, then the device's, in series.
//   busy: a program issues the next task while the device runs the previous
//     one (mplan's generated program, a framework's training loop): the task
//     takes whichever side is longer. A pipeline one task deep: no credit is
//     taken for a host further ahead, so a run of tiny tasks is never priced
//     below its host's work.
enum class StreamState { idle, busy };
double stream_time_ms(const KernelCost& cost, StreamState stream);

// The fraction of peak the work's arithmetic reaches on a full GPU, and the
// peak it is a fraction of (FLOP/s), in a math mode. A GEMM-family conv
// kernel's efficiency includes its tile cost: L / (L + the architecture's
// reduction_half_length), L its reduction_length.
double work_efficiency(const Device& device, const KernelWork& work, MathMode math, double& peak_flops);

// The utilisation curve: items / (items + half), where `half` is the work
// that fills half the device (the architecture's items per SM times SMs).
double utilisation(const Device& device, double parallel_items);

}  // namespace mplan
