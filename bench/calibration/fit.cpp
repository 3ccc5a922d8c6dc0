// The fit of the architecture tables (fit.h).

#include "bench/calibration/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

namespace mplan::calibration {
namespace {

constexpr double kPrior = 0.02;  // lambda: weight of ln(p / p0)^2 per parameter
// Own tables: every free parameter has data of its own and the starting
// values are another architecture's, so the prior only keeps the descent
// regular.
constexpr double kOwnPrior = 1e-4;
// The loss of every fit: soft L1 on e = ln(predicted / measured),
// 2 k^2 (sqrt(1 + (e/k)^2) - 1): e^2 for errors below ~k, 2 k |e| above, so
// the fit is close to the median regression that matches the reported
// median error. k was chosen on the fit split alone (its H100 conv median:
// k 0.1 19.1%, 0.25 20.1%, 0.5 21.1%; squared loss 24.5%).
constexpr double kRobustScale = 0.1;
// Start of a GEMM family's reduction_half_length in an own table: 64
// reduction steps (a few of the operand pipeline's 8-32-deep stages).
constexpr double kStartReductionHalf = 64;
// The GEMM families share one tile cost in an own table (fit.h): their
// kernels share the tile and epilogue code and differ in how they address
// the operands, a per-step cost their efficiencies already hold.
constexpr ConvFamily kGemmFamilies[] = {ConvFamily::implicit_gemm, ConvFamily::implicit_precomp_gemm,
                                        ConvFamily::gemm};
// Start of a backward-filter split-K chunk: the model's default (conv_algorithms.cpp).
constexpr double kStartFilterChunk = 1024;
constexpr int kTiedFamily = static_cast<int>(ConvFamily::implicit_precomp_gemm);
// Start of a framework's host term: 1 µs, next to nothing beyond the launches
// and calls the model prices; the data move it (no prior).
constexpr double kStartHostUs = 1;

// A parameter the fit moves: a value, its bounds and its starting value.
struct Free {
  std::string name;
  double* value;
  double lo, hi, start;
  bool prior = true;  // false: the data alone (a framework's host term, whose start is a guess)
};

// Weighted soft-L1 sum of log errors over the fit split, plus the prior.
struct Objective {
  const std::vector<Case>& cases;
  double prior = kPrior;
  std::vector<double> weights;  // 0 for held-out cases

  explicit Objective(const std::vector<Case>& all, double lambda = kPrior)
      : cases(all), prior(lambda), weights(all.size(), 0) {
    std::map<std::string, int> group_size;
    auto group = [](const Case& c) { return c.device + " " + case_kind_name(c.kind); };
    for (const Case& c : cases)
      if (!c.holdout) ++group_size[group(c)];
    for (size_t i = 0; i < cases.size(); ++i)
      if (!cases[i].holdout) weights[i] = 1.0 / group_size[group(cases[i])];
  }

  double operator()(const Params& p, Devices& devices, const std::vector<Free>& free) const {
    apply(p, devices);
    return score(p, devices, free);
  }

  // The objective with the devices' tables as they are.
  double score(const Params& p, const Devices& devices, const std::vector<Free>& free) const {
    double sum = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (weights[i] == 0) continue;
      const double predicted = predict_ms(cases[i], devices.at(cases[i].device), p.source);
      const double e = std::log(predicted / cases[i].measured_ms);
      const double k = kRobustScale;
      sum += weights[i] * 2 * k * k * (std::sqrt(1 + (e / k) * (e / k)) - 1);
    }
    for (const Free& f : free) {
      if (!f.prior) continue;
      const double e = std::log(*f.value / f.start);
      sum += prior * e * e;
    }
    return sum;
  }
};

// Coordinate descent on ln p of the free parameters: each sweep tries a
// step up and down per parameter, grows the step after a success and halves
// it after a failure, until every step is below 1e-3. Returns the objective.
double descend(const std::vector<Case>& cases, Params& p, Devices& devices, std::vector<Free>& free, bool verbose,
               double prior = kPrior) {
  const Objective objective(cases, prior);
  double best = objective(p, devices, free);
  if (verbose)
    fmt::print("fit: {} parameters over {} fit cases; start: objective {:.5f}\n", free.size(),
               std::count_if(cases.begin(), cases.end(), [](const Case& c) { return !c.holdout; }), best);
  std::vector<double> step(free.size(), 0.5);
  for (int sweep = 0; sweep < 400; ++sweep) {
    double largest = 0;
    for (size_t i = 0; i < free.size(); ++i) {
      Free& f = free[i];
      const double original = *f.value;
      bool improved = false;
      for (double sign : {+1.0, -1.0}) {
        const double candidate = std::clamp(original * std::exp(sign * step[i]), f.lo, f.hi);
        if (candidate == original) continue;
        *f.value = candidate;
        const double value = objective(p, devices, free);
        if (value < best - 1e-12) {
          best = value;
          improved = true;
          break;
        }
        *f.value = original;
      }
      step[i] = improved ? std::min(1.0, step[i] * 1.5) : step[i] * 0.5;
      largest = std::max(largest, step[i]);
    }
    if (verbose && sweep % 20 == 0) fmt::print("fit: sweep {:3d}: objective {:.5f}\n", sweep, best);
    if (largest < 1e-3) {
      if (verbose) fmt::print("fit: converged after {} sweeps: objective {:.5f}\n", sweep + 1, best);
      break;
    }
  }
  return best;
}

std::string yaml_number(double v) { return fmt::format("{:.4g}", v); }

// A host term (cases.h, SourceTerms) for every framework with fit network
// cases that has none yet, started at kStartHostUs and moved by the data
// alone.
void add_host_terms(const std::vector<Case>& cases, SourceTerms& terms, std::vector<Free>& free) {
  std::set<std::string> frameworks;
  for (const Case& c : cases)
    if (!c.holdout && c.kind == CaseKind::network && !c.framework.empty() && !terms.count(host_key(c.framework)))
      frameworks.insert(c.framework);
  for (const std::string& framework : frameworks) terms.emplace(host_key(framework), kStartHostUs);
  for (const std::string& framework : frameworks) {
    double& us = terms.at(host_key(framework));
    free.push_back({host_key(framework), &us, 0.01, 1000, us, false});
  }
}

}  // namespace

// Generations without measurements of their own take a relative's values:
// Turing's SM (TU10x) is Volta's, with FP16 tensor cores and no TF32; Ada's
// (AD10x) is the consumer Ampere SM, with TF32, FP16 and BF16 tensor cores.
std::string params_arch(const std::string& name) {
  if (name == "hopper" || name == "ada") return "ampere";
  if (name == "turing") return "volta";
  return name;
}

namespace {

// The table the shared parameters give an architecture.
ArchEfficiency shared_table(const Params& p, const std::string& name, const ArchEfficiency& base) {
  ArchEfficiency table = base;
  const std::string own = params_arch(name);
  // Ampere's FP32 kernels have no measurement of their own: Volta's values.
  const ArchParams& fp32 = p.arch.at(own == "ampere" ? "volta" : own);
  const ArchParams& tensor = p.arch.at(own);
  // Maxwell's data predate cuDNN's Winograd kernels: Pascal's factor (same SM design).
  const double w_winograd = own == "maxwell" ? p.arch.at("pascal").w_winograd : fp32.w_winograd;
  for (int f = 0; f < kConvFamilies; ++f) {
    const ConvFamily family = static_cast<ConvFamily>(f);
    const bool transform = conv_family_is_transform(family);
    const bool winograd = family == ConvFamily::winograd || family == ConvFamily::winograd_nonfused;
    const double w = !transform ? 1.0 : winograd ? w_winograd : fp32.w_fft;
    const double dir[3] = {1.0, transform ? p.transform_backward_data : p.gemm_backward_data,
                           transform ? p.transform_backward_filter : p.gemm_backward_filter};
    for (int d = 0; d < 3; ++d) table.conv[f][d] = std::min(1.0, fp32.s * p.family[f] * dir[d] * w);
  }
  table.fft_transform = std::min(1.0, fp32.s * p.transform);
  table.linear_gemm = std::min(0.9, fp32.s * p.linear);  // no SGEMM beats 90% of peak
  table.half_items_per_sm = fp32.half;
  table.conv_call_overhead_us = fp32.overhead_us;
  // A table fitted on networks has one overhead for every kernel (networks
  // cannot tell a call's from a kernel's): nothing of its file's own.
  table.conv_kernel_overhead_us = -1;
  table.family_call_overhead_us = ArchEfficiency::unset_overheads();
  table.pointwise_call_overhead_us = ArchEfficiency::unset_overheads();
  table.memory_efficiency = std::min(1.0, fp32.memory);
  // Fitted on networks, which a framework runs on a busy stream: the launch
  // splits at the shared gap, the call overhead is the host's.
  table.kernel_gap_us = p.kernel_gap_us;
  table.host_overhead_us = fp32.overhead_us;
  const bool tensor_cores = own == "volta" || own == "ampere";
  table.tensor_fp16 = tensor_cores ? std::min(1.0, tensor.fp16) : 0;
  table.tensor_bf16 = own == "ampere" ? std::min(1.0, tensor.fp16) : 0;  // no BF16 data: FP16's
  table.tensor_tf32 = own == "ampere" ? std::min(1.0, tensor.tf32) : 0;
  // A borrowing architecture's own speed factors (fit.h, Params::speed).
  auto it = p.speed.find(name);
  if (it == p.speed.end()) return table;
  for (const auto& [mode, factor] : it->second) {
    if (mode == MathMode::fp32) {
      for (auto& directions : table.conv)
        for (double& e : directions) e = std::min(1.0, e * factor);
      table.fft_transform = std::min(1.0, table.fft_transform * factor);
      table.linear_gemm = std::min(0.9, table.linear_gemm * factor);
    }
    double* tensor_mode = mode == MathMode::tf32   ? &table.tensor_tf32
                          : mode == MathMode::fp16 ? &table.tensor_fp16
                          : mode == MathMode::bf16 ? &table.tensor_bf16
                                                   : nullptr;
    if (tensor_mode) *tensor_mode = std::min(1.0, *tensor_mode * factor);
    // BF16 is priced as FP16 (no BF16 data): an FP16 factor moves both unless BF16 has its own.
    if (mode == MathMode::fp16 && !it->second.count(MathMode::bf16))
      table.tensor_bf16 = std::min(1.0, table.tensor_bf16 * factor);
  }
  return table;
}

}  // namespace

ArchEfficiency arch_table(const Params& p, const std::string& name, const ArchEfficiency& base) {
  ArchEfficiency table = shared_table(p, name, base);
  auto it = p.own.find(name);
  if (it == p.own.end()) return table;
  // Fitted on kernel times of its own (fit.h): the FP32 values are its own;
  // entries without data keep the shared table's ratio to
  // implicit_precomp_gemm in their direction; tensor cores stay the parent's.
  const OwnTable& own = it->second;
  const int ipg = static_cast<int>(ConvFamily::implicit_precomp_gemm);
  const ArchEfficiency shared = table;
  for (int f = 0; f < kConvFamilies; ++f)
    for (int d = 0; d < 3; ++d) {
      if (own.measured[f][d])
        table.conv[f][d] = own.table.conv[f][d];
      else if (own.measured[ipg][d] && shared.conv[ipg][d] > 0)
        table.conv[f][d] = std::min(1.0, own.table.conv[ipg][d] * shared.conv[f][d] / shared.conv[ipg][d]);
    }
  // One tile cost for the GEMM families (fit_own_table fits it on implicit_precomp_gemm's entry).
  for (ConvFamily f : kGemmFamilies)
    table.reduction_half_length[static_cast<int>(f)] = own.table.reduction_half_length[kTiedFamily];
  table.filter_reduction_chunk = own.table.filter_reduction_chunk;
  table.pointwise = own.table.pointwise;
  table.unavailable = own.table.unavailable;
  table.fft_transform = own.table.fft_transform;
  table.linear_gemm = own.table.linear_gemm;
  table.half_items_per_sm = own.table.half_items_per_sm;
  table.conv_call_overhead_us = own.table.conv_call_overhead_us;
  table.conv_kernel_overhead_us = own.table.conv_kernel_overhead_us;
  table.family_call_overhead_us = own.table.family_call_overhead_us;
  table.pointwise_call_overhead_us = own.table.pointwise_call_overhead_us;
  table.memory_efficiency = own.table.memory_efficiency;
  // Kernel times from an idle stream count host and device work together and
  // cannot split them: every fixed cost stays the device's (docs/cost-model.md,
  // "Host and device").
  table.kernel_gap_us = -1;
  table.host_overhead_us = 0;
  return table;
}

Devices load_case_devices(const std::vector<Case>& cases) {
  Devices devices;
  for (const Case& c : cases) {
    if (devices.count(c.device)) continue;
    Result<Device> device = load_device(c.device);
    MPLAN_CHECK(device.ok(), device.ok() ? "" : device.error().to_string());
    devices.emplace(c.device, std::move(device).value());
  }
  return devices;
}

void apply(const Params& p, Devices& devices) {
  for (auto& [name, device] : devices) device.arch = arch_table(p, device.architecture, device.arch);
}

Params fit(const std::vector<Case>& cases, Devices devices) {
  Params p;
  // Which architectures have fit data, and in which math modes.
  std::map<std::string, std::set<MathMode>> data;
  std::set<std::string> winograd_data;  // architectures with fit data from cuDNN 5 or later
  std::vector<Case> borrowed;           // fit cases of architectures that borrow a relative's values
  for (const Case& c : cases) {
    if (c.holdout) continue;
    const std::string& own = devices.at(c.device).architecture;
    const std::string arch = params_arch(own);
    // A borrowing architecture's data fit its speed factors (below), not its relative's values.
    if (arch != own) {
      p.speed[own].emplace(c.math, 1.0);
      borrowed.push_back(c);
      continue;
    }
    data[arch].insert(c.math);
    if (c.math == MathMode::fp32 && library_has(c.library, ConvDirection::forward, "winograd"))
      winograd_data.insert(arch);
  }
  std::vector<Free> free;
  auto add = [&](std::string name, double* v, double lo, double hi) { free.push_back({std::move(name), v, lo, hi, *v}); };
  // The GEMM families' ratios stay at their starting values: the data time
  // the library's fastest GEMM kernel, which cannot tell them apart (fit.h).
  for (ConvFamily f : {ConvFamily::fft, ConvFamily::fft_tiling, ConvFamily::winograd, ConvFamily::winograd_nonfused})
    add(std::string("family.") + conv_family_name(f), &p.family[static_cast<int>(f)], 0.1, 3.0);
  add("transform", &p.transform, 0.05, 2.0);
  add("linear", &p.linear, 0.3, 2.0);
  add("gemm_backward_data", &p.gemm_backward_data, 0.3, 2.0);
  add("gemm_backward_filter", &p.gemm_backward_filter, 0.3, 2.0);
  add("transform_backward_data", &p.transform_backward_data, 0.3, 2.0);
  add("transform_backward_filter", &p.transform_backward_filter, 0.3, 2.0);
  for (const Case& c : cases)
    if (!c.holdout && c.release > 0) p.source.emplace(release_key(devices.at(c.device).architecture, c.library), 1.0);
  for (auto& [key, factor] : p.source) add("release." + key, &factor, 0.3, 5.0);
  add("kernel_gap_us", &p.kernel_gap_us, 0.2, 5.0);
  for (auto& [name, a] : p.arch) {
    const std::set<MathMode>& modes = data[name];
    if (modes.count(MathMode::fp32)) {
      add(name + ".s", &a.s, 0.1, 0.9);
      add(name + ".w_fft", &a.w_fft, 0.2, 5.0);
      if (winograd_data.count(name)) add(name + ".w_winograd", &a.w_winograd, 0.2, 5.0);
      add(name + ".half_items_per_sm", &a.half, 256, 262144);
      add(name + ".overhead_us", &a.overhead_us, 0.5, 200);
      add(name + ".memory", &a.memory, 0.6, 0.95);
    }
    if (modes.count(MathMode::fp16)) add(name + ".fp16", &a.fp16, 0.05, 1.0);
    if (modes.count(MathMode::tf32)) add(name + ".tf32", &a.tf32, 0.05, 1.0);
  }
  std::vector<Case> shared;
  for (const Case& c : cases)
    if (params_arch(devices.at(c.device).architecture) == devices.at(c.device).architecture) shared.push_back(c);
  // The host terms of the frameworks with fit networks here; a framework
  // whose fit networks all run on a borrowing architecture gets its term in
  // the borrowers' step below.
  add_host_terms(shared, p.source, free);
  descend(shared, p, devices, free, true);
  for (const Free& f : free) fmt::print("fit:   {:<28} {:10.4g}  (start {:.4g})\n", f.name, *f.value, f.start);
  // Then the borrowing architectures' speed factors, on their own cases
  // alone, so that no other table moves.
  if (borrowed.empty()) return p;
  std::vector<Free> speed;
  for (auto& [arch, modes] : p.speed)
    for (auto& [mode, factor] : modes)
      speed.push_back({arch + ".speed." + math_mode_name(mode), &factor, 0.25, 4.0, factor});
  add_host_terms(borrowed, p.source, speed);
  descend(borrowed, p, devices, speed, true);
  for (const Free& f : speed) fmt::print("fit:   {:<28} {:10.4g}  (start {:.4g})\n", f.name, *f.value, f.start);
  return p;
}

std::array<std::vector<std::string>, 3> unavailable_algorithms(const std::vector<Case>& cases) {
  std::array<std::set<std::string>, 3> ran, possible;
  for (const Case& c : cases) {
    if (c.holdout) continue;
    for (const auto& [task, count] : c.convs) {
      const int d = static_cast<int>(task.direction);
      for (const ConvOption& o : task.options) ran[d].insert(o.algorithm);
      for (const std::string& algorithm : conv_algorithm_names(task.direction)) {
        ConvFamily family{};
        if (conv_family_of(task.direction, algorithm, family) && conv_supported(task.direction, algorithm, task.shape))
          possible[d].insert(algorithm);
      }
    }
  }
  std::array<std::vector<std::string>, 3> off;
  for (int d = 0; d < 3; ++d)
    for (const std::string& algorithm : possible[d])
      if (!ran[d].count(algorithm)) off[d].push_back(algorithm);
  return off;
}

void fit_own_table(const std::vector<Case>& cases, Devices devices, Params& p, const std::string& arch) {
  // Only the architecture's devices are re-tabled and predicted.
  Devices own_devices;
  for (const Case& c : cases) {
    MPLAN_CHECK(devices.at(c.device).architecture == arch, "fit_own_table: a case of another architecture");
    own_devices.emplace(c.device, devices.at(c.device));
  }
  // Start from the table the parameters give it now (its parent's values).
  p.own.erase(arch);
  OwnTable start{arch_table(p, arch, ArchEfficiency{}), {}};
  bool linear = false, transform = false;
  for (const Case& c : cases) {
    if (c.holdout) continue;
    for (const auto& [task, count] : c.convs)
      for (const ConvOption& o : task.options)
        for (const KernelWork& w : o.phases) {
          if (w.kind == KernelClass::conv) {
            start.measured[static_cast<int>(w.family)][static_cast<int>(w.direction)] = true;
            if (w.pointwise) start.measured_pointwise[static_cast<int>(w.family)][static_cast<int>(w.direction)] = true;
          }
          transform = transform || w.kind == KernelClass::transform;
        }
    for (const auto& [task, count] : c.others) linear = linear || task.shape.op == Op::linear;
  }
  start.table.unavailable = unavailable_algorithms(cases);
  p.own[arch] = start;
  ArchEfficiency& t = p.own[arch].table;
  std::vector<Free> free;
  auto add = [&](std::string name, double* v, double lo, double hi) {
    *v = std::clamp(*v, lo, hi);
    free.push_back({std::move(name), v, lo, hi, *v});
  };
  for (int f = 0; f < kConvFamilies; ++f)
    for (int d = 0; d < 3; ++d)
      if (start.measured[f][d])
        add(fmt::format("{}.{}.{}", arch, conv_family_name(static_cast<ConvFamily>(f)),
                        conv_direction_name(static_cast<ConvDirection>(d))),
            &t.conv[f][d], 0.01, 1.0);
  // The GEMM families' tile cost (arch_efficiency.h): one parameter for the
  // three (arch_table copies it), where they have fit data.
  bool gemm_data = false;
  for (ConvFamily f : kGemmFamilies)
    for (bool measured : start.measured[static_cast<int>(f)]) gemm_data = gemm_data || measured;
  if (gemm_data) {
    double& half = t.reduction_half_length[kTiedFamily];
    if (half <= 0) half = kStartReductionHalf;
    add(arch + ".gemm_reduction_half_length", &half, 1, 1e5);
  }
  // Each GEMM family's backward-filter split-K chunk (arch_efficiency.h),
  // where its backward-filter kernel has fit data; started at the model's 1024.
  for (ConvFamily f : kGemmFamilies) {
    if (!start.measured[static_cast<int>(f)][static_cast<int>(ConvDirection::backward_filter)]) continue;
    double& chunk = t.filter_reduction_chunk[static_cast<int>(f)];
    if (chunk <= 0) chunk = kStartFilterChunk;
    add(fmt::format("{}.{}.filter_reduction_chunk", arch, conv_family_name(f)), &chunk, 16, 1e7);
  }
  // Each GEMM family's factor on pointwise layers (arch_efficiency.h), per
  // direction with pointwise fit data; started at 1 (no difference).
  for (ConvFamily f : kGemmFamilies)
    for (int d = 0; d < 3; ++d) {
      if (!start.measured_pointwise[static_cast<int>(f)][d]) continue;
      add(fmt::format("{}.{}.{}.pointwise", arch, conv_family_name(f), conv_direction_name(static_cast<ConvDirection>(d))),
          &t.pointwise[static_cast<int>(f)][d], 0.2, 5.0);
    }
  if (transform) add(arch + ".fft_transform", &t.fft_transform, 0.01, 1.0);
  if (linear) add(arch + ".linear_gemm", &t.linear_gemm, 0.05, 0.9);
  add(arch + ".half_items_per_sm", &t.half_items_per_sm, 256, 262144);
  // The call overhead of each family with fit data (arch_efficiency.h
  // family_call_overhead_us), started at the table's; the table's own
  // conv_call_overhead_us stays the start (a family without data, which the
  // kernel times never ran, keeps it). The further kernels of a call have
  // one overhead of their own, started at the call's.
  if (t.conv_kernel_overhead_us < 0) t.conv_kernel_overhead_us = t.conv_call_overhead_us;
  add(arch + ".kernel_overhead_us", &t.conv_kernel_overhead_us, 0.1, 200);
  for (int f = 0; f < kConvFamilies; ++f)
    for (int d = 0; d < 3; ++d) {
      if (!start.measured[f][d]) continue;
      double& us = t.family_call_overhead_us[f][d];
      if (us < 0) us = t.conv_call_overhead_us;
      add(fmt::format("{}.{}.{}.call_overhead_us", arch, conv_family_name(static_cast<ConvFamily>(f)),
                      conv_direction_name(static_cast<ConvDirection>(d))),
          &us, 0.5, 400);
    }
  // Each GEMM family's call overhead on pointwise layers in each direction
  // with pointwise fit data (arch_efficiency.h pointwise_call_overhead_us),
  // started at the family's.
  for (ConvFamily f : kGemmFamilies)
    for (int d = 0; d < 3; ++d) {
      if (!start.measured_pointwise[static_cast<int>(f)][d]) continue;
      double& us = t.pointwise_call_overhead_us[static_cast<int>(f)][d];
      if (us < 0) us = t.call_overhead_us(f, static_cast<ConvDirection>(d));
      add(fmt::format("{}.{}.{}.pointwise_call_overhead_us", arch, conv_family_name(f),
                      conv_direction_name(static_cast<ConvDirection>(d))),
          &us, 0.5, 400);
    }
  // The streaming kernels timed are the runtime's own (the program's), not
  // STREAM-like copies: the bound is lower than the shared fit's 0.6.
  add(arch + ".memory", &t.memory_efficiency, 0.3, 0.95);
  descend(cases, p, own_devices, free, true, kOwnPrior);
  for (const Free& f : free) fmt::print("fit:   {:<40} {:10.4g}  (start {:.4g})\n", f.name, *f.value, f.start);
}

SourceTerms fit_source_terms(const std::vector<Case>& cases, const Devices& devices) {
  Devices tabled = devices;
  Params p;
  for (const Case& c : cases)
    if (!c.holdout && c.release > 0) p.source.emplace(release_key(devices.at(c.device).architecture, c.library), 1.0);
  std::vector<Free> free;
  for (auto& [key, factor] : p.source) free.push_back({"release." + key, &factor, 0.3, 5.0, 1.0});
  add_host_terms(cases, p.source, free);
  // The objective re-tables the devices from `p`; keep their own tables instead.
  const Objective objective(cases);
  std::vector<double> step(free.size(), 0.5);
  double best = objective.score(p, tabled, free);
  for (int sweep = 0; sweep < 400; ++sweep) {
    double largest = 0;
    for (size_t i = 0; i < free.size(); ++i) {
      const double original = *free[i].value;
      bool improved = false;
      for (double sign : {+1.0, -1.0}) {
        *free[i].value = std::clamp(original * std::exp(sign * step[i]), free[i].lo, free[i].hi);
        const double value = objective.score(p, tabled, free);
        if (value < best - 1e-12) {
          best = value;
          improved = true;
          break;
        }
        *free[i].value = original;
      }
      step[i] = improved ? std::min(1.0, step[i] * 1.5) : step[i] * 0.5;
      largest = std::max(largest, step[i]);
    }
    if (largest < 1e-3) break;
  }
  return p.source;
}

void write_arch_files(const Params& p, const Devices& devices, const std::map<std::string, std::string>& fitted_on,
                      const std::map<std::string, std::string>& held_out) {
  static const std::map<std::string, std::string> kDescriptions = {
      {"kepler", "Kepler (GK110, GK110B, GK210): Tesla K40, K80, GTX Titan Black"},
      {"maxwell", "Maxwell (GM200): GTX Titan X"},
      {"pascal", "Pascal (GP100, GP102): Tesla P100, GTX 1080 Ti"},
      {"volta", "Volta (GV100): Tesla V100, Titan V; FP16 tensor cores"},
      {"ampere", "Ampere (GA100): A100; TF32, FP16 and BF16 tensor cores"},
      {"hopper", "Hopper (GH100): H100; TF32, FP16 and BF16 tensor cores"},
      {"turing", "Turing (TU102, TU104): Quadro RTX 8000, Tesla T4; FP16 tensor cores"},
      {"ada", "Ada Lovelace (AD102, AD104): RTX 6000 Ada, GeForce RTX 4090, L4; TF32, FP16 and BF16 tensor cores"},
  };
  // What a table without measurements of its own stands on.
  static const std::map<std::string, std::string> kBorrowed = {
      {"ampere", "No FP32 Ampere measurement was found: the FP32 values are Volta's."},
      {"hopper", "No Hopper measurement was found: every value is Ampere's."},
      {"turing", "Turing has no table of its own: Volta's values (the same SM design, FP16 tensor cores)."},
      {"ada", "Ada has no table of its own: Ampere's values (its FP32 ones Volta's). Half of an Ada SM's FP32\n"
              "# lanes are shared with integer work and the FP32 peak counts them all: FP32 predictions are\n"
              "# unmeasured here and may be too fast."},
  };
  for (const auto& [name, description] : kDescriptions) {
    const ArchEfficiency table = arch_table(p, name, ArchEfficiency{});
    const std::string path = architectures_dir() + "/" + name + ".yaml";
    std::ofstream out(path);
    MPLAN_CHECK(static_cast<bool>(out), "cannot write " + path);
    out << "# Architecture table of the analytic cost model: " << description << ".\n"
        << "# Written by `build/bench/calibration_bench --fit --write` (bench/calibration/fit.h says how);\n"
        << "# rerun it rather than editing by hand. Format: docs/device-format.md, \"Architecture tables\".\n"
        << "# Efficiencies are fractions of the peak (FP32, or the math mode's tensor-core peak) a kernel\n"
        << "# family reaches on a full GPU.\n";
    if (p.own.count(name))
      out << "# FP32 values fitted on kernel times of its own (bench/data/calibration/kernel_times.csv, fit split);\n"
          << "# entries without data keep the parent's ratio to implicit_precomp_gemm; the tensor-core\n"
          << "# efficiencies are the parent's (" << params_arch(name) << "): no tensor-core measurement.\n";
    else if (kBorrowed.count(name))
      out << "# " << kBorrowed.at(name) << "\n";
    if (p.speed.count(name)) {
      out << "# Its own networks (fitted_on) fit one speed factor per math mode on those values:";
      for (const auto& [mode, factor] : p.speed.at(name))
        out << " " << math_mode_name(mode) << " " << yaml_number(factor) << ";";
      out << "\n# its other values are the relative's unchanged.\n";
    }
    out << "name: " << name << "\n";
    auto text = [](const std::map<std::string, std::string>& m, const std::string& key) {
      auto it = m.find(key);
      return it == m.end() ? std::string("none") : it->second;
    };
    out << "fitted_on: \"" << text(fitted_on, name) << "\"\n";
    out << "held_out_error: \"" << text(held_out, name) << "\"\n";
    out << "conv_efficiency:\n";
    for (int f = 0; f < kConvFamilies; ++f) {
      const ConvFamily family = static_cast<ConvFamily>(f);
      out << fmt::format("  {}: {{forward: {}, backward_data: {}", conv_family_name(family),
                         yaml_number(table.conv[f][0]), yaml_number(table.conv[f][1]));
      if (family != ConvFamily::winograd) out << ", backward_filter: " << yaml_number(table.conv[f][2]);
      out << "}\n";
    }
    out << "fft_transform_efficiency: " << yaml_number(table.fft_transform) << "\n"
        << "linear_gemm_efficiency: " << yaml_number(table.linear_gemm) << "\n"
        << "half_saturation_items_per_sm: " << yaml_number(table.half_items_per_sm) << "\n"
        << "conv_call_overhead_us: " << yaml_number(table.conv_call_overhead_us) << "\n";
    if (table.conv_kernel_overhead_us >= 0)
      out << "conv_kernel_overhead_us: " << yaml_number(table.conv_kernel_overhead_us) << "\n";
    // A {family: {direction: us}} map of call overheads, written only where
    // some family has a value.
    auto write_overheads = [&](const char* key, const std::array<std::array<double, 3>, kConvFamilies>& us) {
      std::string by_family;
      for (int f = 0; f < kConvFamilies; ++f) {
        std::string row;
        for (int d = 0; d < 3; ++d)
          if (us[f][d] >= 0)
            row += (row.empty() ? "" : ", ") + std::string(conv_direction_name(static_cast<ConvDirection>(d))) +
                   ": " + yaml_number(us[f][d]);
        if (!row.empty()) by_family += fmt::format("  {}: {{{}}}\n", conv_family_name(static_cast<ConvFamily>(f)), row);
      }
      if (!by_family.empty()) out << key << ":\n" << by_family;
    };
    write_overheads("family_call_overhead_us", table.family_call_overhead_us);
    write_overheads("pointwise_call_overhead_us", table.pointwise_call_overhead_us);
    out << "memory_efficiency: " << yaml_number(table.memory_efficiency) << "\n";
    if (table.kernel_gap_us >= 0) out << "kernel_gap_us: " << yaml_number(table.kernel_gap_us) << "\n";
    if (table.host_overhead_us > 0) out << "host_overhead_us: " << yaml_number(table.host_overhead_us) << "\n";
    // A per-GEMM-family map, written only where some family has a value.
    auto write_gemm_map = [&](const char* key, auto value_of) {
      std::string entries;
      for (ConvFamily f : kGemmFamilies)
        if (value_of(f) > 0)
          entries += (entries.empty() ? "" : ", ") + std::string(conv_family_name(f)) + ": " + yaml_number(value_of(f));
      if (!entries.empty()) out << key << ": {" << entries << "}\n";
    };
    write_gemm_map("gemm_reduction_half_length", [&](ConvFamily f) { return table.reduction_half(f); });
    write_gemm_map("filter_reduction_chunk", [&](ConvFamily f) { return table.filter_chunk(f); });
    // Pointwise factors, written only where one is not 1 (and only as the
    // parser takes them: the fit's bounds do not see the efficiency they scale).
    std::string pointwise;
    for (ConvFamily f : kGemmFamilies) {
      std::string row;
      for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
        MPLAN_CHECK(table.conv_efficiency(f, d) * table.pointwise_factor(f, d) <= 1.5,
                    fmt::format("the fit's {} {} pointwise factor {} makes the efficiency faster than 1.5 of peak: "
                                "tighten its bound in fit_own_table",
                                conv_family_name(f), conv_direction_name(d), table.pointwise_factor(f, d)));
        if (table.pointwise_factor(f, d) != 1.0)
          row += (row.empty() ? "" : ", ") + std::string(conv_direction_name(d)) + ": " +
                 yaml_number(table.pointwise_factor(f, d));
      }
      if (!row.empty()) pointwise += fmt::format("  {}: {{{}}}\n", conv_family_name(f), row);
    }
    if (!pointwise.empty()) out << "pointwise_conv_factor:\n" << pointwise;
    bool off = false;
    for (const auto& list : table.unavailable) off = off || !list.empty();
    if (off) {
      out << "unavailable_algorithms: {";
      std::string sep;
      for (int d = 0; d < 3; ++d) {
        if (table.unavailable[d].empty()) continue;
        out << sep << conv_direction_name(static_cast<ConvDirection>(d)) << ": [";
        for (size_t i = 0; i < table.unavailable[d].size(); ++i) out << (i ? ", " : "") << table.unavailable[d][i];
        out << "]";
        sep = ", ";
      }
      out << "}\n";
    }
    if (table.tensor_tf32 > 0 || table.tensor_fp16 > 0 || table.tensor_bf16 > 0) {
      out << "tensor_core_efficiency: {";
      std::string sep;
      if (table.tensor_tf32 > 0) out << sep << "tf32: " << yaml_number(table.tensor_tf32), sep = ", ";
      if (table.tensor_fp16 > 0) out << sep << "fp16: " << yaml_number(table.tensor_fp16), sep = ", ";
      if (table.tensor_bf16 > 0) out << sep << "bf16: " << yaml_number(table.tensor_bf16), sep = ", ";
      out << "}\n";
    }
    fmt::print("wrote {}\n", path);
  }
  (void)devices;
}

}  // namespace mplan::calibration
