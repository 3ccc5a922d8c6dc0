#pragma once
// The fit of the architecture tables (examples/devices/architectures/*.yaml)
// to the fit split of the calibration set: least squares in log space,
//   minimise  sum_cases w_c * ln(predicted_c / measured_c)^2
//           + lambda * sum_params ln(p / p0)^2,
// over a few parameters, by coordinate descent on ln p (deterministic).
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
//   per architecture and old release (cuDNN R1-R3) in the data, a speed
//   factor of that release's kernels (not in the product: NVIDIA tuned each
//   architecture's kernels by a different amount from release to release);
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
// factor from Pascal), and says so.

#include <map>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "profiler/arch_efficiency.h"
#include "profiler/device.h"

namespace mplan::calibration {

struct ArchParams {
  double s = 0.65, w_fft = 1.0, w_winograd = 1.0, half = 8192, overhead_us = 5, memory = 0.8, tf32 = 0.5, fp16 = 0.5;
};

struct Params {
  // Family ratios to implicit_precomp_gemm, in ConvFamily order.
  double family[kConvFamilies] = {0.7, 1.0, 1.15, 1.0, 1.0, 0.85, 1.0};
  double transform = 0.4;  // fft_transform / s
  double linear = 1.15;    // linear_gemm / s
  double gemm_backward_data = 1.0, gemm_backward_filter = 0.9;
  double transform_backward_data = 1.0, transform_backward_filter = 1.0;
  ReleaseFactors release;  // "kepler.R2" -> time factor of cuDNN R2 on Kepler (fitted where data has it)
  std::map<std::string, ArchParams> arch = {{"kepler", {}}, {"maxwell", {}}, {"pascal", {}}, {"volta", {}},
                                            {"ampere", {}}};
};

// The architecture whose parameters `name` uses ("hopper" -> "ampere").
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
Params fit(const std::vector<Case>& cases, Devices devices);

// Fits only the old releases' speed factors, the devices' tables as they are
// (the same objective; evaluating the committed tables uses this).
ReleaseFactors fit_release_factors(const std::vector<Case>& cases, const Devices& devices);

// Writes examples/devices/architectures/<name>.yaml for every architecture.
void write_arch_files(const Params& p, const Devices& devices, const std::map<std::string, std::string>& fitted_on,
                      const std::map<std::string, std::string>& held_out);

}  // namespace mplan::calibration
