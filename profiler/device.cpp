// Device files (docs/device-format.md): YAML, one figure per key, units in
// the key's name, each figure's public source in a comment beside it.

#include "profiler/device.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/bytes.h"
#include "core/input_file.h"
#include "core/yaml_reader.h"
#include "profiler/cost_model.h"
#include "profiler/install_paths.h"


namespace mplan {
namespace {

Error error_at(const std::string& file, const YAML::Mark& mark, std::string message) {
  // yaml-cpp counts from 0; a mark of -1 means "unknown".
  SourceLocation where{file, mark.line >= 0 ? mark.line + 1 : 0,
                       mark.column >= 0 ? mark.column + 1 : 0};
  return Error{where, std::move(message)};
}

// Every key a device file may have, and whether it must.
struct Key {
  const char* name;
  bool required;
};
constexpr Key kKeys[] = {
    {"name", true},
    {"description", false},
    {"peak_fp32_tflops", true},
    {"memory_bandwidth_gb_per_s", true},
    {"memory", true},
    {"sm_count", true},
    {"host_to_device_gb_per_s", true},
    {"device_to_host_gb_per_s", true},
    {"copy_engines", true},
    {"copy_duplex_slowdown", false},
    {"launch_latency_us", true},
    {"copy_latency_us", true},
    {"architecture", true},
    {"math_modes", false},
    {"default_math_mode", false},
    {"peak_tf32_tflops", false},
    {"peak_fp16_tflops", false},
    {"peak_bf16_tflops", false},
};

// The tensor-core peak key of a math mode.
const char* peak_key(MathMode mode) {
  switch (mode) {
    case MathMode::fp32: return "peak_fp32_tflops";
    case MathMode::tf32: return "peak_tf32_tflops";
    case MathMode::fp16: return "peak_fp16_tflops";
    case MathMode::bf16: return "peak_bf16_tflops";
  }
  return "?";
}

Result<double> positive_number(const YAML::Node& node, const char* key, const std::string& file) {
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return error_at(file, node.Mark(), fmt::format("'{}': expected a number", key));
  }
  // .inf and .nan are YAML numbers, but no device has them.
  if (!std::isfinite(value) || !(value > 0))
    return error_at(file, node.Mark(), fmt::format("'{}': expected a positive finite number, got {}", key,
                                                   node.Scalar()));
  return value;
}

Result<Device> read_device(const YAML::Node& root, const std::string& file) {
  if (!root.IsMap())
    return error_at(file, root.Mark(), "expected a device: a map of name, peak_fp32_tflops, memory, ...");
  std::set<std::string> known;
  for (const Key& key : kKeys) known.insert(key.name);
  std::set<std::string> seen;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar())
      return error_at(file, entry.first.Mark(), "expected a key name (such as memory), got a list or map");
    const std::string key = entry.first.Scalar();
    if (!seen.insert(key).second)
      return error_at(file, entry.first.Mark(), fmt::format("'{}' is given twice", key));
    if (!entry.second.IsScalar() && key != "math_modes")
      return error_at(file, entry.second.Mark(), fmt::format("'{}': expected a single value, not a list or map", key));
    if (!known.count(key))
      return error_at(file, entry.first.Mark(),
                      fmt::format("unknown key '{}' (expected one of: name, description, peak_fp32_tflops, "
                                  "memory_bandwidth_gb_per_s, memory, sm_count, host_to_device_gb_per_s, "
                                  "device_to_host_gb_per_s, copy_engines, copy_duplex_slowdown, launch_latency_us, "
                                  "copy_latency_us, architecture, math_modes, default_math_mode, peak_tf32_tflops, "
                                  "peak_fp16_tflops, peak_bf16_tflops)",
                                  key));
  }
  for (const Key& key : kKeys)
    if (key.required && !root[key.name])
      return error_at(file, root.Mark(), fmt::format("missing '{}'", key.name));

  Device device;
  device.source_file = file;
  device.name = root["name"].Scalar();
  if (device.name.empty()) return error_at(file, root["name"].Mark(), "'name': expected a non-empty name");
  if (root["description"]) device.description = root["description"].Scalar();

  auto number = [&](const char* key) { return positive_number(root[key], key, file); };
  constexpr double kGiga = 1e9;
  auto tflops = number("peak_fp32_tflops");
  if (!tflops) return tflops.error();
  device.peak_fp32_flops = *tflops * 1e12;
  auto bandwidth = number("memory_bandwidth_gb_per_s");
  if (!bandwidth) return bandwidth.error();
  device.memory_bandwidth_bytes_per_s = *bandwidth * kGiga;
  auto h2d = number("host_to_device_gb_per_s");
  if (!h2d) return h2d.error();
  device.host_to_device_bytes_per_s = *h2d * kGiga;
  auto d2h = number("device_to_host_gb_per_s");
  if (!d2h) return d2h.error();
  device.device_to_host_bytes_per_s = *d2h * kGiga;
  auto launch = number("launch_latency_us");
  if (!launch) return launch.error();
  device.launch_latency_ms = *launch / 1000.0;
  auto copy = number("copy_latency_us");
  if (!copy) return copy.error();
  device.copy_latency_ms = *copy / 1000.0;

  auto whole = [&](const char* key, int low, int high) -> Result<int> {
    const YAML::Node node = root[key];
    int value = 0;
    try {
      value = node.as<int>();
    } catch (const YAML::Exception&) {
      return error_at(file, node.Mark(), fmt::format("'{}': expected a whole number", key));
    }
    if (value < low || value > high)
      return error_at(file, node.Mark(), fmt::format("'{}': expected {} to {}, got {}", key, low, high, value));
    return value;
  };
  auto sms = whole("sm_count", 1, 100000);
  if (!sms) return sms.error();
  device.sm_count = *sms;
  auto engines = whole("copy_engines", 1, 2);
  if (!engines) return engines.error();
  device.copy_engines = *engines;
  if (const YAML::Node node = root["copy_duplex_slowdown"]) {
    const std::string expected = fmt::format(
        "'copy_duplex_slowdown': expected 1 to {} (how much slower a copy runs while the other direction copies)",
        kMaxDuplexSlowdown);
    double slowdown = 0;
    try {
      slowdown = node.as<double>();
    } catch (const YAML::Exception&) {
      return error_at(file, node.Mark(), fmt::format("{}, got {}", expected, node.Scalar()));
    }
    if (!(slowdown >= 1.0 && slowdown <= kMaxDuplexSlowdown))  // NaN fails too
      return error_at(file, node.Mark(), fmt::format("{}, got {}", expected, node.Scalar()));
    // One shared copy engine never runs the two directions at once.
    if (device.copy_engines != 2 && slowdown != 1.0)
      return error_at(file, node.Mark(), "'copy_duplex_slowdown': needs copy_engines: 2 (with one engine the two "
                                         "directions never copy at once)");
    device.copy_duplex_slowdown = slowdown;
  }

  auto memory = parse_bytes(root["memory"].Scalar());
  if (!memory) return error_at(file, root["memory"].Mark(), "'memory': " + memory.error().message);
  if (*memory <= 0) return error_at(file, root["memory"].Mark(), "'memory': expected a positive size");
  device.memory_bytes = *memory;

  // The architecture's efficiency table.
  device.architecture = root["architecture"].Scalar();
  Result<ArchEfficiency> arch = load_arch_efficiency(device.architecture);
  if (!arch) return error_at(file, root["architecture"].Mark(), "'architecture': " + arch.error().message);
  device.arch = std::move(arch).value();

  // Math modes and their tensor-core peaks.
  if (const YAML::Node modes = root["math_modes"]) {
    if (!modes.IsSequence())
      return error_at(file, modes.Mark(), "'math_modes': expected a list such as [fp32, tf32, fp16, bf16]");
    device.math_modes.clear();
    for (const YAML::Node& m : modes) {
      const std::optional<MathMode> mode = parse_math_mode(m.Scalar());
      if (!mode)
        return error_at(file, m.Mark(),
                        fmt::format("'math_modes': unknown mode '{}' (expected fp32, tf32, fp16, bf16)", m.Scalar()));
      if (std::find(device.math_modes.begin(), device.math_modes.end(), *mode) != device.math_modes.end())
        return error_at(file, m.Mark(), fmt::format("'math_modes': '{}' is listed twice", m.Scalar()));
      device.math_modes.push_back(*mode);
    }
    if (!device.has_math(MathMode::fp32))
      return error_at(file, modes.Mark(), "'math_modes': every GPU has fp32; list it");
  }
  for (MathMode mode : {MathMode::tf32, MathMode::fp16, MathMode::bf16}) {
    const char* key = peak_key(mode);
    const bool listed = device.has_math(mode);
    if (listed && !root[key])
      return error_at(file, root["math_modes"].Mark(),
                      fmt::format("'math_modes' lists {} but '{}' is missing", math_mode_name(mode), key));
    if (!listed && root[key])
      return error_at(file, root[key].Mark(),
                      fmt::format("'{}' is given but 'math_modes' does not list {}", key, math_mode_name(mode)));
    if (!listed) continue;
    auto peak = number(key);
    if (!peak) return peak.error();
    (mode == MathMode::tf32 ? device.peak_tf32_flops
     : mode == MathMode::fp16 ? device.peak_fp16_flops
                              : device.peak_bf16_flops) = *peak * 1e12;
    if (device.arch.tensor_efficiency(mode) <= 0)
      return error_at(file, root["architecture"].Mark(),
                      fmt::format("architecture '{}' has no tensor-core efficiency for {} ({}), which the device lists",
                                  device.architecture, math_mode_name(mode), device.arch.source_file));
  }
  device.default_math = device.has_math(MathMode::tf32) ? MathMode::tf32 : MathMode::fp32;
  if (const YAML::Node node = root["default_math_mode"]) {
    const std::optional<MathMode> mode = parse_math_mode(node.Scalar());
    if (!mode || !device.has_math(*mode))
      return error_at(file, node.Mark(),
                      fmt::format("'default_math_mode': expected one of the device's math modes, got '{}'",
                                  node.Scalar()));
    device.default_math = *mode;
  }
  return device;
}

}  // namespace

Result<Device> parse_device(const std::string& yaml_text, const std::string& file) {
  Result<YAML::Node> loaded =
      load_yaml_document(yaml_text, file, "a device: a map of name, peak_fp32_tflops, memory, ...");
  if (!loaded) return loaded.error();
  try {
    return read_device(*loaded, file);
  } catch (const YAML::Exception& e) {
    return error_at(file, e.mark, "unexpected YAML content: " + e.msg);
  }
}

bool Device::has_math(MathMode mode) const {
  return std::find(math_modes.begin(), math_modes.end(), mode) != math_modes.end();
}

double Device::peak_flops(MathMode mode) const {
  switch (mode) {
    case MathMode::fp32: return peak_fp32_flops;
    case MathMode::tf32: return peak_tf32_flops;
    case MathMode::fp16: return peak_fp16_flops;
    case MathMode::bf16: return peak_bf16_flops;
  }
  return 0;
}

std::string devices_dir() { return install_paths().devices_dir; }

std::vector<std::string> available_devices() { return yaml_names_in(devices_dir()); }

Result<Device> load_device(const std::string& name_or_path) {
  Result<std::string> path = shipped_file(name_or_path, devices_dir(), "device");
  if (!path) return path.error();
  Result<std::string> text = read_input_file(*path, "the device file", kMaxDeviceFileBytes);
  if (!text) return text.error();
  return parse_device(*text, *path);
}

}  // namespace mplan
