#pragma once
// How well cuDNN and cuBLAS use one GPU architecture (Kepler, Maxwell,
// Pascal, Volta, Ampere, Hopper): the fraction of peak each convolution
// algorithm family reaches in each direction, the small-kernel behaviour of
// the utilisation curve, fixed costs, and the tensor-core efficiency of each
// math mode. A device file names its architecture; the table lives in
// examples/devices/architectures/<name>.yaml and is fitted by
// bench/calibration_bench --fit (docs/cost-model.md, "Calibration").
//
// Families are named after cuDNN's forward algorithms; the backward
// algorithms belong to the family whose kernels they share:
//   backward-data   algo_0 -> implicit_gemm, algo_1 -> implicit_precomp_gemm
//   backward-filter algo_0 -> implicit_gemm, algo_1 -> implicit_precomp_gemm,
//                   algo_3 -> gemm
// and fft, fft_tiling, winograd, winograd_nonfused keep their names.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "profiler/math_mode.h"

namespace mplan {

enum class ConvDirection { forward, backward_data, backward_filter };
const char* conv_direction_name(ConvDirection direction);  // "forward", ...

enum class ConvFamily { implicit_gemm, implicit_precomp_gemm, gemm, fft, fft_tiling, winograd, winograd_nonfused };
inline constexpr int kConvFamilies = 7;
const char* conv_family_name(ConvFamily family);  // "implicit_gemm", ...
// The family of a cuDNN algorithm of a direction (see above); false for an
// algorithm cuDNN does not have.
bool conv_family_of(ConvDirection direction, std::string_view algorithm, ConvFamily& family);
// Whether the family's arithmetic is a GEMM that tensor cores run (cuDNN's
// implicit and explicit GEMM kernels; FFT and Winograd stay on FP32 cores).
bool conv_family_uses_tensor_cores(ConvFamily family);
// Whether the family works in a transformed domain (FFT, FFT tiling, the two
// Winograd families): the complement of the GEMM families.
bool conv_family_is_transform(ConvFamily family);

struct ArchEfficiency {
  // Every family and direction at factor 1 (pointwise's default).
  static std::array<std::array<double, 3>, kConvFamilies> filled_factors() {
    std::array<std::array<double, 3>, kConvFamilies> ones{};
    for (auto& row : ones) row.fill(1.0);
    return ones;
  }
  std::string name = "maxwell";
  std::string source_file;  // "" when built in code
  // conv[family][direction]: fraction of peak FP32 FLOP/s the family's
  // arithmetic kernels reach on a full GPU. Built-in values: the Maxwell row
  // of the first calibration (docs/cost-model.md).
  std::array<std::array<double, 3>, kConvFamilies> conv = {{
      {0.45, 0.45, 0.40},  // implicit_gemm
      {0.65, 0.65, 0.65},  // implicit_precomp_gemm
      {0.75, 0.75, 0.75},  // gemm
      {0.65, 0.65, 0.65},  // fft (its complex GEMM; transforms run at fft_transform)
      {0.65, 0.65, 0.65},  // fft_tiling
      {0.55, 0.55, 0.55},  // winograd
      {0.65, 0.65, 0.65},  // winograd_nonfused (its batched GEMMs)
  }};
  // reduction_half_length[family]: the GEMM families' tile cost. An output
  // tile of a GEMM kernel pays a fixed cost (filling the operand pipeline,
  // the epilogue that writes the tile) that its reduction amortises, so the
  // arithmetic reaches conv[family][direction] * L / (L + this), L the
  // reduction length one CTA sums (KernelWork::reduction_length: C/g*R*S
  // forward, K/g*R*S backward-data, the split-K chunk of b*P*Q
  // backward-filter). 0: no such cost (the family's efficiency is flat in L).
  // Only implicit_gemm, implicit_precomp_gemm and gemm have one.
  std::array<double, kConvFamilies> reduction_half_length{};
  // filter_reduction_chunk[family]: the b*P*Q a CTA of the family's
  // backward-filter kernel reduces before adding its partial dW (split-K):
  // the kernel's parallel work is the filter's elements times
  // ceil(b*P*Q / chunk), and a tile's reduction min(b*P*Q, chunk). cuDNN's
  // weight-gradient kernels split differently from family to family.
  // 0: the model's default (1024, profiler/conv_algorithms.cpp). Only
  // implicit_gemm, implicit_precomp_gemm and gemm have one.
  std::array<double, kConvFamilies> filter_reduction_chunk{};
  // pointwise[family][direction]: a factor on conv[family][direction] for a
  // pointwise convolution (1x1 filter, stride 1, no padding), where the
  // unfolded input is the input itself: the implicit GEMM's per-step
  // address arithmetic is free, and cuDNN runs other kernels for it. On the
  // H100's fit split the GEMM families' bias differs by 0.69-1.22x between
  // pointwise and other layers in every direction (docs/cost-model.md,
  // "Pointwise convolutions"). 1: no difference (every architecture without
  // kernel times of its own). Only implicit_gemm, implicit_precomp_gemm and
  // gemm have one; FP32 only (the tensor-core modes have no such data).
  std::array<std::array<double, 3>, kConvFamilies> pointwise = filled_factors();
  // Algorithms the architecture's cuDNN does not run, per direction (cuDNN 9
  // on Hopper ran no fused Winograd and no backward-filter FFT tiling for any
  // FP32 shape): the analytic model offers them in no math mode (only FP32
  // was measured; the list is assumed to hold for TF32/FP16/BF16 too).
  std::array<std::vector<std::string>, 3> unavailable;
  double fft_transform = 0.25;         // cuFFT and Winograd transform kernels, fraction of peak
  double linear_gemm = 0.75;           // cuBLAS SGEMM of linear layers
  double half_items_per_sm = 8192;     // utilisation u = items / (items + this * SMs)
  double conv_call_overhead_us = 0;    // fixed cost of a cuDNN convolution call's first kernel beyond its launch
  // Fixed cost of each further kernel of the call (FFT and non-fused Winograd
  // run 4 kernels; fused Winograd, the explicit GEMM and the precomputed GEMM
  // 2, but backward-data algo_1 1). cuDNN 9's legacy API pays most of
  // its fixed cost once per call (the H200's tiny layers: a 4-kernel FFT
  // takes 50-60 us, a 1-kernel implicit GEMM 33-36 us). Negative: the call
  // overhead (every kernel pays it; every table fitted on networks alone).
  double conv_kernel_overhead_us = -1;
  double memory_efficiency = 0.8;      // fraction of bandwidth streaming kernels reach
  // The device's share of a kernel's launch (the device file's
  // launch_latency_us): the gap between two kernels on a busy stream, whose
  // host issued the second while the first ran; the rest of the launch is
  // the host's (kernel_work.h, KernelCost), clamped to the launch. Negative
  // (the key absent): the whole launch is the device's.
  double kernel_gap_us = -1;
  // The host's share of each cuDNN overhead (a call's, a further kernel's):
  // min(overhead, this) is host work, the rest device work. 0: all of it is
  // the device's (a table fitted on kernel times from an idle stream, which
  // cannot tell the two apart).
  double host_overhead_us = 0;
  // Fraction of the tensor-core peak of a math mode that GEMM-like kernels
  // reach on a full GPU (forward; backward directions scale as in FP32).
  // 0: the architecture has no tensor cores for the mode.
  double tensor_tf32 = 0, tensor_fp16 = 0, tensor_bf16 = 0;
  std::string fitted_on;         // which measurements the table was fitted on
  std::string held_out_error;    // what the calibration bench measured on the held-out split

  double conv_efficiency(ConvFamily family, ConvDirection direction) const {
    return conv[static_cast<int>(family)][static_cast<int>(direction)];
  }
  // family_call_overhead_us[family][direction]: the call overhead of the
  // family's calls in a direction, where it has one of its own (cuDNN 9 on
  // the H200: a lone implicit-GEMM kernel from 17-21 us, a precomputed GEMM's
  // forward or backward-data call on a pointwise layer 0.12-0.2 ms).
  // Negative: conv_call_overhead_us.
  std::array<std::array<double, 3>, kConvFamilies> family_call_overhead_us = unset_overheads();
  static std::array<std::array<double, 3>, kConvFamilies> unset_overheads() {
    std::array<std::array<double, 3>, kConvFamilies> unset{};
    for (auto& row : unset) row.fill(-1.0);
    return unset;
  }
  // pointwise_call_overhead_us[family][direction]: a GEMM family's call
  // overhead on a pointwise layer, where it has one of its own: cuDNN 9 on
  // Hopper runs other kernels there, and the precomputed GEMM's small calls
  // take 0.12-0.16 ms on 1x1 layers against 0.06-0.07 ms on 3x3 ones.
  // Negative: the family's call overhead (family_call_overhead_us).
  std::array<std::array<double, 3>, kConvFamilies> pointwise_call_overhead_us = unset_overheads();
  double tensor_efficiency(MathMode mode) const;
  double call_overhead_us(ConvFamily family, ConvDirection direction, bool pointwise = false) const {
    const double on_pointwise =
        pointwise ? pointwise_call_overhead_us[static_cast<int>(family)][static_cast<int>(direction)] : -1;
    if (on_pointwise >= 0) return on_pointwise;
    const double own = family_call_overhead_us[static_cast<int>(family)][static_cast<int>(direction)];
    return own < 0 ? conv_call_overhead_us : own;
  }
  double kernel_overhead_us() const {
    return conv_kernel_overhead_us < 0 ? conv_call_overhead_us : conv_kernel_overhead_us;
  }
  double reduction_half(ConvFamily family) const { return reduction_half_length[static_cast<int>(family)]; }
  double filter_chunk(ConvFamily family) const { return filter_reduction_chunk[static_cast<int>(family)]; }
  double pointwise_factor(ConvFamily family, ConvDirection direction) const {
    return pointwise[static_cast<int>(family)][static_cast<int>(direction)];
  }
  bool runs(ConvDirection direction, std::string_view algorithm) const;
};

// Parses an architecture file's text; `file` names it in error messages.
Result<ArchEfficiency> parse_arch_efficiency(const std::string& yaml_text, const std::string& file);
// Reads <devices_dir()>/architectures/<name>.yaml; an unknown name is an
// error that lists the known ones.
Result<ArchEfficiency> load_arch_efficiency(const std::string& name);
std::string architectures_dir();
std::vector<std::string> available_architectures();

}  // namespace mplan
