#pragma once
// The fit of the architecture tables (examples/devices/architectures/*.yaml)
// to the fit split of the calibration set: a robust regression in log space,
//   minimise  sum_cases w_c * rho(ln(predicted_c / measured_c))
//           + lambda * sum_params ln(p / p0)^2,
// over a few parameters, by coordinate descent on ln p (deterministic).
// rho is soft L1 (fit.cpp's kRobustScale): e^2 for small errors, linear in
// |e| for large ones, so that one odd measurement (V100's mixed-precision
// ResNet-50 of NGC 21.03, 1.55x the model) cannot drag a whole table.
// w_c = 1 / (fit cases of the case's GPU and kind), so that every GPU's
// single-layer set and network set weigh the same. The small prior pulls
// parameters the data cannot see back to their starting value.
//
// Parameters (docs/cost-model.md, "Calibration"):
//   shared by every architecture: the efficiency of the FFT and Winograd
//   families relative to implicit_precomp_gemm (implicit_gemm at 0.7 and
//   explicit gemm at 1.15 of it stay fixed: the data time the fastest of the
//   GEMM family, which cannot tell them apart), of the FFT/Winograd transform kernels
//   and of cuBLAS relative to it, a backward-data and a backward-filter factor
//   for the GEMM families and one for the transform families;
//   shared by every architecture: the device's share of a launch
//   (kernel_gap_us: only whole networks on a busy stream see it);
//   per architecture and old release (cuDNN R1-R3) in the data, a speed
//   factor of that release's kernels (not in the product: NVIDIA tuned each
//   architecture's kernels by a different amount from release to release);
//   per framework with fit networks, its own host work per task (not in the
//   product, no prior: cases.h SourceTerms);
//   per architecture: the scale s (implicit_precomp_gemm forward efficiency),
//   a factor on the FFT families and one on the Winograd families (only
//   where the data has cuDNN 5 or later: Maxwell's data predate Winograd, so
//   Maxwell takes Pascal's, the same SM design), the utilisation curve's
//   half-saturation items per SM, the fixed cost of each cuDNN kernel, the
//   streaming memory efficiency (bounded to 0.6-0.95, what STREAM-like copies
//   reach), and the tensor-core efficiency of each math mode that has data.
//   s is bounded by 0.9: no FP32 cuDNN kernel runs faster.
// An architecture without data of its own takes its parent's values
// (ampere's FP32 ones from volta, hopper's from ampere, Maxwell's Winograd
// factor from Pascal), and says so. Turing and Ada borrow whole tables
// (Volta's, Ampere's); where they have fit cases of their own (whole
// networks), one speed factor per math mode is fitted on those cases alone,
// after the shared fit, so that no other table moves (Params::speed).
//
// An architecture with per-algorithm kernel times of its own (the kernel
// profiler's result files, kernel_times.h: hopper) gets its own table instead,
// fitted on its own cases alone so that no other architecture's values move
// (fit_own_table): every convolution family and direction with fit data is a
// parameter of its own (the data time every algorithm, so the families can
// be told apart), and so are the transform and cuBLAS efficiencies, the
// half-saturation items per SM, each family's cuDNN call overhead, each GEMM
// family's call overhead on pointwise layers, and one overhead for the
// further kernels of a call (arch_efficiency.h), the memory
// efficiency, and the GEMM families' tile cost (reduction_half_length,
// arch_efficiency.h; one parameter for the three families, whose kernels
// share their tile and epilogue code; started at 64) and each GEMM family's
// backward-filter split-K chunk (filter_reduction_chunk, started at the
// model's 1024), and each GEMM family's factor on pointwise layers in each
// direction (arch_efficiency.h pointwise, started at 1). The table also
// lists the algorithms its cuDNN does not run: those the model supports for
// some fit task of a direction that the kernel times never ran for any fit
// task of that direction. An entry without data keeps its starting table's ratio to
// implicit_precomp_gemm in the same direction; the tensor-core efficiencies
// stay the parent's (FP32 measurements say nothing of them). The loss is
// robust (soft L1 on the log ratio, fit.cpp's kRobustScale): every option
// cuDNN accepts is a case, and some are pathological kernels 5-30x slower
// than their family (cuDNN 9's workspace-less `gemm`, backward-data `algo_1`
// at stride 2) that no per-family efficiency can follow and that a squared
// loss would let drag their family's efficiency. The prior is much weaker
// (every free parameter has data; the starting values are another
// architecture's).

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "profiler/arch_efficiency.h"
#include "profiler/device.h"

namespace mplan::calibration {

// half starts at what Hopper's kernel times fit (hopper.yaml,
// half_saturation_items_per_sm: 1935-2352 across refits): whole networks
// cannot tell it from s (a lower peak with a later saturation prices a big
// net the same), so the prior keeps it near the one architecture whose
// per-layer times at every size measure it. Started at 8192 it stayed there
// and priced small-batch layers 1.2-1.4x too slow (ResNet-152, batch 16-64).
struct ArchParams {
  double s = 0.65, w_fft = 1.0, w_winograd = 1.0, half = 2352, overhead_us = 5, memory = 0.8, tf32 = 0.5, fp16 = 0.5;
};

// The table of an architecture fitted on kernel times of its own, and which
// convolution entries had fit data.
struct OwnTable {
  ArchEfficiency table;
  std::array<std::array<bool, 3>, kConvFamilies> measured{};
  // ... and which GEMM-family entries had fit data on pointwise layers (their
  // pointwise factor is a parameter of its own).
  std::array<std::array<bool, 3>, kConvFamilies> measured_pointwise{};
};

struct Params {
  // Family ratios to implicit_precomp_gemm, in ConvFamily order.
  double family[kConvFamilies] = {0.7, 1.0, 1.15, 1.0, 1.0, 0.85, 1.0};
  double transform = 0.4;  // fft_transform / s
  double linear = 1.15;    // linear_gemm / s
  double gemm_backward_data = 1.0, gemm_backward_filter = 0.9;
  // The device's share of a launch (arch_efficiency.h kernel_gap_us), one for
  // every architecture: only whole networks on a busy stream see it.
  double kernel_gap_us = 1.0;
  double transform_backward_data = 1.0, transform_backward_filter = 1.0;
  SourceTerms source;  // old releases' factors, frameworks' host work (cases.h; fitted where data has them)
  std::map<std::string, ArchParams> arch = {{"kepler", {}}, {"maxwell", {}}, {"pascal", {}}, {"volta", {}},
                                            {"ampere", {}}};
  std::map<std::string, OwnTable> own;  // architectures fitted on kernel times of their own
  // An architecture that borrows a relative's values (params_arch) and has
  // fit data of its own: one speed factor per math mode with data, on the
  // borrowed compute efficiencies (FP32: every convolution family, the
  // transforms and cuBLAS; a tensor-core mode: that mode's efficiency, an
  // FP16 factor BF16's too). The prior pulls a factor towards 1, so one case
  // is fitted closely, not exactly.
  std::map<std::string, std::map<MathMode, double>> speed;
};

// The architecture whose parameters `name` uses ("hopper" -> "ampere",
// "turing" -> "volta", "ada" -> "ampere").
std::string params_arch(const std::string& name);

// The table of an architecture under the parameters (names, fitted_on and
// held_out_error are left as in `base`).
ArchEfficiency arch_table(const Params& p, const std::string& name, const ArchEfficiency& base);

// The devices of the cases, loaded once.
using Devices = std::map<std::string, Device>;
Devices load_case_devices(const std::vector<Case>& cases);

// Re-tables every device from the parameters.
void apply(const Params& p, Devices& devices);

// Fits the parameters to the fit split; prints progress lines to stdout.
// The cases must not include those of an architecture fitted on its own.
Params fit(const std::vector<Case>& cases, Devices devices);

// The algorithms an architecture's cuDNN does not run, per direction, from
// its kernel-time cases' fit split: those the model supports for some fit
// task of a direction (and that have a family) that no fit task of that
// direction ran, in name order.
std::array<std::vector<std::string>, 3> unavailable_algorithms(const std::vector<Case>& cases);

// Fits the own table of `arch` to the fit split of `cases` (its cases only),
// starting from the table `p` gives it now; prints progress lines.
void fit_own_table(const std::vector<Case>& cases, Devices devices, Params& p, const std::string& arch);

// Fits only the source terms (old releases' speed factors, frameworks' host
// work), the devices' tables as they are (the same objective; evaluating the
// committed tables uses this).
SourceTerms fit_source_terms(const std::vector<Case>& cases, const Devices& devices);

// Writes examples/devices/architectures/<name>.yaml for every architecture.
void write_arch_files(const Params& p, const Devices& devices, const std::map<std::string, std::string>& fitted_on,
                      const std::map<std::string, std::string>& held_out);

}  // namespace mplan::calibration
