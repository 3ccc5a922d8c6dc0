// Architecture tables (arch_efficiency.h): YAML, one figure per key, fitted
// by bench/calibration_bench --fit.

#include "profiler/arch_efficiency.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <sstream>

#include "profiler/install_paths.h"

namespace mplan {
namespace {

constexpr ConvFamily kFamilies[] = {ConvFamily::implicit_gemm, ConvFamily::implicit_precomp_gemm,
                                    ConvFamily::gemm,          ConvFamily::fft,
                                    ConvFamily::fft_tiling,    ConvFamily::winograd,
                                    ConvFamily::winograd_nonfused};
constexpr ConvDirection kDirections[] = {ConvDirection::forward, ConvDirection::backward_data,
                                         ConvDirection::backward_filter};

Error error_at(const std::string& file, const YAML::Mark& mark, std::string message) {
  SourceLocation where{file, mark.line >= 0 ? mark.line + 1 : 0, mark.column >= 0 ? mark.column + 1 : 0};
  return Error{where, std::move(message)};
}

// A fraction in (0, 1.5]: efficiencies above 1 would be faster than peak
// (Winograd and FFT count direct-method-equivalent work elsewhere, not here).
Result<double> fraction(const YAML::Node& node, const std::string& key, const std::string& file, bool zero_ok) {
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return error_at(file, node.Mark(), fmt::format("'{}': expected a number", key));
  }
  if (!(value >= 0 && value <= 1.5) || (!zero_ok && value == 0))
    return error_at(file, node.Mark(),
                    fmt::format("'{}': expected a fraction of peak in {}0..1.5, got {}", key, zero_ok ? "" : "(", value));
  return value;
}

Result<double> positive(const YAML::Node& node, const std::string& key, const std::string& file) {
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return error_at(file, node.Mark(), fmt::format("'{}': expected a number", key));
  }
  if (!(value >= 0) || !std::isfinite(value))
    return error_at(file, node.Mark(), fmt::format("'{}': expected a finite number >= 0, got {}", key, value));
  return value;
}

// A GEMM family named as a key of the map `key` (the per-family maps).
Result<ConvFamily> gemm_family_key(const YAML::Node& name, const std::string& key, const std::string& file) {
  ConvFamily family{};
  if (!conv_family_of(ConvDirection::forward, name.Scalar(), family) || !conv_family_uses_tensor_cores(family))
    return error_at(file, name.Mark(),
                    fmt::format("'{}': unknown GEMM family '{}' (expected implicit_gemm, implicit_precomp_gemm, gemm)",
                                key, name.Scalar()));
  return family;
}

// The direction of a name ("forward", ...); nullptr for another name.
const ConvDirection* direction_named(const std::string& name) {
  for (const ConvDirection& candidate : kDirections)
    if (name == conv_direction_name(candidate)) return &candidate;
  return nullptr;
}

// A direction named as a key of a per-direction map; `key` names the entry
// ("pointwise_conv_factor.gemm.forward") in the error.
Result<ConvDirection> direction_key(const YAML::Node& name, const std::string& key, const std::string& file) {
  const ConvDirection* direction = direction_named(name.Scalar());
  if (!direction)
    return error_at(file, name.Mark(),
                    fmt::format("'{}': unknown direction '{}' (expected forward, backward_data, backward_filter)", key,
                                name.Scalar()));
  return *direction;
}

// family_call_overhead_us (every family) and pointwise_call_overhead_us (the
// GEMM families): {family: us} (every direction) or {family: {direction: us}}.
Status parse_call_overheads(const YAML::Node& node, const std::string& file, const std::string& key, bool gemm_only,
                            std::array<std::array<double, 3>, kConvFamilies>& into) {
  const char* families = gemm_only ? "implicit_gemm, implicit_precomp_gemm, gemm"
                                   : "implicit_gemm, implicit_precomp_gemm, gemm, fft, fft_tiling, winograd, "
                                     "winograd_nonfused";
  if (!node.IsMap())
    return error_at(file, node.Mark(),
                    fmt::format("'{}': expected a map of algorithm families ({}) to microseconds, or to maps "
                                "{{forward, backward_data, backward_filter}} of microseconds",
                                key, families));
  for (const auto& entry : node) {
    ConvFamily family{};
    const std::string name = entry.first.Scalar();
    if (!conv_family_of(ConvDirection::forward, name, family))
      return error_at(file, entry.first.Mark(),
                      fmt::format("'{}': unknown family '{}' (expected {})", key, name, families));
    if (gemm_only && !conv_family_uses_tensor_cores(family))
      return error_at(file, entry.first.Mark(),
                      fmt::format("'{}': '{}' is not a GEMM family (expected {})", key, name, families));
    auto& row = into[static_cast<int>(family)];
    if (!entry.second.IsMap()) {
      auto us = positive(entry.second, key + "." + name, file);
      if (!us) return us.error();
      row.fill(*us);
      continue;
    }
    for (const auto& value : entry.second) {
      const std::string entry_key = fmt::format("{}.{}.{}", key, name, value.first.Scalar());
      auto direction = direction_key(value.first, entry_key, file);
      if (!direction) return direction.error();
      auto us = positive(value.second, entry_key, file);
      if (!us) return us.error();
      row[static_cast<int>(*direction)] = *us;
    }
  }
  return Ok{};
}

// pointwise_conv_factor: {family: {direction: factor}} over the GEMM
// families; a factor in (0, 5], and the family's efficiency times it still
// no faster than 1.5 of peak (as `fraction`).
Status parse_pointwise(const YAML::Node& node, const std::string& file, ArchEfficiency& arch) {
  if (!node.IsMap())
    return error_at(file, node.Mark(),
                    "'pointwise_conv_factor': expected a map {implicit_gemm, implicit_precomp_gemm, gemm} of "
                    "{forward, backward_data, backward_filter}");
  for (const auto& entry : node) {
    auto family = gemm_family_key(entry.first, "pointwise_conv_factor", file);
    if (!family) return family.error();
    const std::string name = entry.first.Scalar();
    if (!entry.second.IsMap())
      return error_at(file, entry.second.Mark(),
                      fmt::format("'pointwise_conv_factor.{}': expected a map {{forward, backward_data, "
                                  "backward_filter}}",
                                  name));
    for (const auto& factor : entry.second) {
      const std::string key = fmt::format("pointwise_conv_factor.{}.{}", name, factor.first.Scalar());
      auto direction = direction_key(factor.first, key, file);
      if (!direction) return direction.error();
      double v = 0;
      try {
        v = factor.second.as<double>();
      } catch (const YAML::Exception&) {
        return error_at(file, factor.second.Mark(), fmt::format("'{}': expected a number", key));
      }
      const double efficiency = arch.conv_efficiency(*family, *direction) * v;
      if (!(v > 0 && v <= 5) || !(efficiency <= 1.5))
        return error_at(file, factor.second.Mark(),
                        fmt::format("'{}': expected a factor in (0, 5] that keeps the efficiency at most 1.5 of "
                                    "peak, got {} (efficiency {:.3g})",
                                    key, v, efficiency));
      arch.pointwise[static_cast<int>(*family)][static_cast<int>(*direction)] = v;
    }
  }
  return Ok{};
}

}  // namespace

const char* conv_direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::forward: return "forward";
    case ConvDirection::backward_data: return "backward_data";
    case ConvDirection::backward_filter: return "backward_filter";
  }
  return "?";
}

const char* conv_family_name(ConvFamily family) {
  switch (family) {
    case ConvFamily::implicit_gemm: return "implicit_gemm";
    case ConvFamily::implicit_precomp_gemm: return "implicit_precomp_gemm";
    case ConvFamily::gemm: return "gemm";
    case ConvFamily::fft: return "fft";
    case ConvFamily::fft_tiling: return "fft_tiling";
    case ConvFamily::winograd: return "winograd";
    case ConvFamily::winograd_nonfused: return "winograd_nonfused";
  }
  return "?";
}

bool conv_family_of(ConvDirection direction, std::string_view algorithm, ConvFamily& family) {
  if (direction != ConvDirection::forward) {
    if (algorithm == "algo_0") return family = ConvFamily::implicit_gemm, true;
    if (algorithm == "algo_1") return family = ConvFamily::implicit_precomp_gemm, true;
    if (algorithm == "algo_3" && direction == ConvDirection::backward_filter) return family = ConvFamily::gemm, true;
    if (algorithm == "implicit_gemm" || algorithm == "implicit_precomp_gemm" || algorithm == "gemm") return false;
  }
  for (ConvFamily f : kFamilies)
    if (algorithm == conv_family_name(f)) return family = f, true;
  return false;
}

bool conv_family_uses_tensor_cores(ConvFamily family) {
  return family == ConvFamily::implicit_gemm || family == ConvFamily::implicit_precomp_gemm ||
         family == ConvFamily::gemm;
}

bool conv_family_is_transform(ConvFamily family) { return !conv_family_uses_tensor_cores(family); }

bool ArchEfficiency::runs(ConvDirection direction, std::string_view algorithm) const {
  const std::vector<std::string>& list = unavailable[static_cast<int>(direction)];
  return std::find(list.begin(), list.end(), algorithm) == list.end();
}

double ArchEfficiency::tensor_efficiency(MathMode mode) const {
  switch (mode) {
    case MathMode::fp32: return 0;
    case MathMode::tf32: return tensor_tf32;
    case MathMode::fp16: return tensor_fp16;
    case MathMode::bf16: return tensor_bf16;
  }
  return 0;
}

namespace {

// conv_efficiency: every family's {forward, backward_data, backward_filter}.
Status parse_conv_efficiency(const YAML::Node& conv, const std::string& file, ArchEfficiency& arch) {
  if (!conv.IsMap()) return error_at(file, conv.Mark(), "'conv_efficiency': expected a map of algorithm families");
  for (const auto& entry : conv) {
    ConvFamily family{};
    if (!conv_family_of(ConvDirection::forward, entry.first.Scalar(), family))
      return error_at(file, entry.first.Mark(),
                      fmt::format("'conv_efficiency': unknown family '{}' (expected implicit_gemm, "
                                  "implicit_precomp_gemm, gemm, fft, fft_tiling, winograd, winograd_nonfused)",
                                  entry.first.Scalar()));
  }
  for (ConvFamily family : kFamilies) {
    const std::string fname = conv_family_name(family);
    const YAML::Node row = conv[fname];
    if (!row || !row.IsMap())
      return error_at(file, conv.Mark(),
                      fmt::format("'conv_efficiency': missing '{}: {{forward, backward_data, backward_filter}}'", fname));
    for (const auto& entry : row) {
      const std::string d = entry.first.Scalar();
      if (d != "forward" && d != "backward_data" && d != "backward_filter")
        return error_at(file, entry.first.Mark(),
                        fmt::format("'{}': unknown direction '{}' (expected forward, backward_data, backward_filter)",
                                    fname, d));
    }
    for (ConvDirection direction : kDirections) {
      const std::string key = fname + "." + conv_direction_name(direction);
      // cuDNN has no backward-filter Winograd (fused): it may be left out.
      const bool optional = family == ConvFamily::winograd && direction == ConvDirection::backward_filter;
      const YAML::Node value = row[conv_direction_name(direction)];
      if (!value) {
        if (optional) continue;
        return error_at(file, row.Mark(), fmt::format("'{}': missing '{}'", fname, conv_direction_name(direction)));
      }
      auto f = fraction(value, key, file, false);
      if (!f) return f.error();
      arch.conv[static_cast<int>(family)][static_cast<int>(direction)] = *f;
    }
  }
  return Ok{};
}

// Per GEMM family numbers: {implicit_gemm, implicit_precomp_gemm, gemm}; an absent key keeps `into`.
Status parse_gemm_family_map(const YAML::Node& root, const char* key, const std::string& file,
                             std::array<double, kConvFamilies>& into, bool at_least_one) {
  const YAML::Node node = root[key];
  if (!node) return Ok{};
  if (!node.IsMap())
    return error_at(file, node.Mark(),
                    fmt::format("'{}': expected a map {{implicit_gemm, implicit_precomp_gemm, gemm}}", key));
  for (const auto& entry : node) {
    auto family = gemm_family_key(entry.first, key, file);
    if (!family) return family.error();
    const std::string name = entry.first.Scalar();
    auto v = positive(entry.second, fmt::format("{}.{}", key, name), file);
    if (!v) return v.error();
    if (at_least_one && *v != 0 && *v < 1)
      return error_at(file, entry.second.Mark(),
                      fmt::format("'{}.{}': expected 0 (the default) or at least 1, got {}", key, name, *v));
    into[static_cast<int>(*family)] = *v;
  }
  return Ok{};
}

// unavailable_algorithms: per direction, the algorithms a GPU's cuDNN does not run.
Status parse_unavailable(const YAML::Node& off, const std::string& file, ArchEfficiency& arch) {
  if (!off.IsMap())
    return error_at(file, off.Mark(),
                    "'unavailable_algorithms': expected a map {forward, backward_data, backward_filter} of lists");
  for (const auto& entry : off) {
    const std::string d = entry.first.Scalar();
    auto direction = direction_key(entry.first, "unavailable_algorithms", file);
    if (!direction) return direction.error();
    if (!entry.second.IsSequence())
      return error_at(file, entry.second.Mark(), fmt::format("'unavailable_algorithms.{}': expected a list", d));
    for (const auto& item : entry.second) {
      const std::string algorithm = item.Scalar();
      ConvFamily family{};
      if (!conv_family_of(*direction, algorithm, family))
        return error_at(file, item.Mark(),
                        fmt::format("'unavailable_algorithms.{}': '{}' is no {} algorithm the model prices (expected "
                                    "one of cuDNN's {} algorithms but direct)",
                                    d, algorithm, d, d));
      // The zero-workspace algorithm must stay: the planner's leanest option.
      if (family == ConvFamily::implicit_gemm)
        return error_at(file, item.Mark(),
                        fmt::format("'unavailable_algorithms.{}': '{}' needs no workspace and cannot be left out",
                                    d, algorithm));
      arch.unavailable[static_cast<int>(*direction)].push_back(algorithm);
    }
  }
  return Ok{};
}

// tensor_core_efficiency: {tf32, fp16, bf16}.
Status parse_tensor_cores(const YAML::Node& tensor, const std::string& file, ArchEfficiency& arch) {
  if (!tensor.IsMap()) return error_at(file, tensor.Mark(), "'tensor_core_efficiency': expected a map {tf32, fp16, bf16}");
  for (const auto& entry : tensor) {
    const std::string mode = entry.first.Scalar();
    const std::optional<MathMode> parsed = parse_math_mode(mode);
    if (!parsed || *parsed == MathMode::fp32)
      return error_at(file, entry.first.Mark(),
                      fmt::format("'tensor_core_efficiency': unknown math mode '{}' (expected tf32, fp16, bf16)", mode));
    auto f = fraction(entry.second, "tensor_core_efficiency." + mode, file, true);
    if (!f) return f.error();
    if (*parsed == MathMode::tf32) arch.tensor_tf32 = *f;
    if (*parsed == MathMode::fp16) arch.tensor_fp16 = *f;
    if (*parsed == MathMode::bf16) arch.tensor_bf16 = *f;
  }
  return Ok{};
}
}  // namespace

Result<ArchEfficiency> parse_arch_efficiency(const std::string& yaml_text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    return error_at(file, e.mark, "not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) return error_at(file, root.Mark(), "expected an architecture table: a map of name, conv_efficiency, ...");
  const std::set<std::string> known = {"name", "description", "fitted_on", "held_out_error", "conv_efficiency",
                                       "fft_transform_efficiency", "linear_gemm_efficiency",
                                       "half_saturation_items_per_sm", "conv_call_overhead_us",
                                       "conv_kernel_overhead_us", "family_call_overhead_us",
                                       "pointwise_call_overhead_us", "memory_efficiency",
                                       "kernel_gap_us", "host_overhead_us", "tensor_core_efficiency", "gemm_reduction_half_length",
                                       "filter_reduction_chunk", "pointwise_conv_factor",
                                       "unavailable_algorithms"};
  for (const auto& entry : root)
    if (!known.count(entry.first.Scalar()))
      return error_at(file, entry.first.Mark(),
                      fmt::format("unknown key '{}' (expected one of: name, description, fitted_on, held_out_error, "
                                  "conv_efficiency, fft_transform_efficiency, linear_gemm_efficiency, "
                                  "half_saturation_items_per_sm, conv_call_overhead_us, conv_kernel_overhead_us, "
                                  "family_call_overhead_us, pointwise_call_overhead_us, memory_efficiency, "
                                  "kernel_gap_us, host_overhead_us, tensor_core_efficiency, gemm_reduction_half_length, filter_reduction_chunk, "
                                  "pointwise_conv_factor, unavailable_algorithms)",
                                  entry.first.Scalar()));
  for (const char* required : {"name", "conv_efficiency", "fft_transform_efficiency", "linear_gemm_efficiency",
                               "half_saturation_items_per_sm", "conv_call_overhead_us", "memory_efficiency"})
    if (!root[required]) return error_at(file, root.Mark(), fmt::format("missing '{}'", required));

  ArchEfficiency arch;
  arch.source_file = file;
  arch.name = root["name"].Scalar();
  if (arch.name.empty()) return error_at(file, root["name"].Mark(), "'name': expected a non-empty name");
  if (root["fitted_on"]) arch.fitted_on = root["fitted_on"].Scalar();
  if (root["held_out_error"]) arch.held_out_error = root["held_out_error"].Scalar();

  if (Status ok = parse_conv_efficiency(root["conv_efficiency"], file, arch); !ok.ok()) return ok.error();
  auto fft = fraction(root["fft_transform_efficiency"], "fft_transform_efficiency", file, false);
  if (!fft) return fft.error();
  arch.fft_transform = *fft;
  auto linear = fraction(root["linear_gemm_efficiency"], "linear_gemm_efficiency", file, false);
  if (!linear) return linear.error();
  arch.linear_gemm = *linear;
  auto memory = fraction(root["memory_efficiency"], "memory_efficiency", file, false);
  if (!memory) return memory.error();
  arch.memory_efficiency = *memory;
  auto half = positive(root["half_saturation_items_per_sm"], "half_saturation_items_per_sm", file);
  if (!half) return half.error();
  arch.half_items_per_sm = *half;
  auto overhead = positive(root["conv_call_overhead_us"], "conv_call_overhead_us", file);
  if (!overhead) return overhead.error();
  arch.conv_call_overhead_us = *overhead;
  // Optional figures >= 0: absent keys keep their defaults.
  for (auto [key, value] : {std::pair{"conv_kernel_overhead_us", &arch.conv_kernel_overhead_us},
                            std::pair{"kernel_gap_us", &arch.kernel_gap_us},
                            std::pair{"host_overhead_us", &arch.host_overhead_us}}) {
    if (!root[key]) continue;
    auto figure = positive(root[key], key, file);
    if (!figure) return figure.error();
    *value = *figure;
  }
  if (const YAML::Node by_family = root["family_call_overhead_us"]) {
    if (Status ok = parse_call_overheads(by_family, file, "family_call_overhead_us", false,
                                         arch.family_call_overhead_us);
        !ok.ok())
      return ok.error();
  }
  if (const YAML::Node on_pointwise = root["pointwise_call_overhead_us"]) {
    if (Status ok = parse_call_overheads(on_pointwise, file, "pointwise_call_overhead_us", true,
                                         arch.pointwise_call_overhead_us);
        !ok.ok())
      return ok.error();
  }

  if (Status ok = parse_gemm_family_map(root, "gemm_reduction_half_length", file, arch.reduction_half_length, false);
      !ok.ok())
    return ok.error();
  if (Status ok = parse_gemm_family_map(root, "filter_reduction_chunk", file, arch.filter_reduction_chunk, true);
      !ok.ok())
    return ok.error();
  if (const YAML::Node pointwise = root["pointwise_conv_factor"]) {
    if (Status ok = parse_pointwise(pointwise, file, arch); !ok.ok()) return ok.error();
  }
  if (const YAML::Node off = root["unavailable_algorithms"]) {
    if (Status ok = parse_unavailable(off, file, arch); !ok.ok()) return ok.error();
  }
  if (const YAML::Node tensor = root["tensor_core_efficiency"]) {
    if (Status ok = parse_tensor_cores(tensor, file, arch); !ok.ok()) return ok.error();
  }
  return arch;
}

// Beside the device files: the source tree or the install (profiler/install_paths.h).
std::string architectures_dir() { return install_paths().devices_dir + "/architectures"; }

std::vector<std::string> available_architectures() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(architectures_dir(), error))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Result<ArchEfficiency> load_arch_efficiency(const std::string& name) {
  namespace fs = std::filesystem;
  const std::string path = architectures_dir() + "/" + name + ".yaml";
  std::error_code error;
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_regular_file(path, error)) {
    std::string names;
    for (const std::string& n : available_architectures()) names += (names.empty() ? "" : ", ") + n;
    return Error{{}, fmt::format("unknown architecture '{}' (expected one of: {})", name,
                                 names.empty() ? "none found in " + architectures_dir() : names)};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{{path, 0, 0}, "cannot read the architecture file"};
  std::ostringstream text;
  text << in.rdbuf();
  Result<ArchEfficiency> arch = parse_arch_efficiency(text.str(), path);
  if (arch.ok() && arch->name != name)
    return Error{{path, 0, 0}, fmt::format("the file of architecture '{}' names itself '{}'", name, arch->name)};
  return arch;
}

}  // namespace mplan
