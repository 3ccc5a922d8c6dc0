// Machine files (docs/machine-format.md): YAML, read with the model format's
// map reader, so that every message names the file, line and column.

#include "profiler/machine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/input_file.h"
#include "core/yaml_reader.h"
#include "profiler/install_paths.h"

namespace mplan {
namespace {

const ExpressionParams kNoParams;
constexpr double kGiga = 1e9;

// A positive, finite number of `key` (GB/s, microseconds).
double positive(const MapReader& r, std::string_view key, bool required, double fallback = 0) {
  if (!r.has(key)) {
    if (required) r.fail(r.node(), fmt::format("missing '{}'", key));
    return fallback;
  }
  const double value = r.optional_double(key, fallback);
  if (!(value > 0) || !std::isfinite(value))
    r.fail(r.get(key), fmt::format("'{}' must be a number > 0, got {}", key, describe_node(r.get(key))));
  return value;
}

// The list under `key` (required or empty), each item a map.
std::vector<YAML::Node> list_of_maps(const MapReader& r, std::string_view key, std::string_view what) {
  std::vector<YAML::Node> items;
  if (!r.has(key)) return items;
  const YAML::Node list = r.get(key);
  if (!list.IsSequence())
    r.fail(list, fmt::format("'{}': expected a list of {}, got {}", key, what, describe_node(list)));
  for (const YAML::Node& item : list) {
    if (!item.IsMap()) r.fail(item, fmt::format("'{}': each item is {}, got {}", key, what, describe_node(item)));
    items.push_back(item);
  }
  return items;
}

Machine read_machine(const YAML::Node& root, const std::string& file) {
  if (!root.IsMap()) fail_at(root, file, "expected a machine: a map of name, gpus, switches, ...");
  const MapReader r(root, file, "", kNoParams);
  r.check_keys({"name", "description", "nodes", "gpus", "switches", "numa", "nvlink", "nvswitch_gb_per_s", "network"},
               "machine");
  Machine m;
  m.source_file = file;
  m.name = r.required_string("name");
  if (m.name.empty()) r.fail(r.get("name"), "'name': expected a non-empty name");
  m.description = r.optional_string("description", "");
  m.nodes = static_cast<int32_t>(r.optional_int("nodes", 1, 1));
  if (m.nodes > 1024) r.fail(r.get("nodes"), fmt::format("'nodes': at most 1024, got {}", m.nodes));

  for (const YAML::Node& item : list_of_maps(r, "numa", "a NUMA node: {host_memory_gb_per_s: X}")) {
    const MapReader n(item, file, "NUMA node " + std::to_string(m.numa.size()), kNoParams);
    n.check_keys({"host_memory_gb_per_s"}, "NUMA node");
    m.numa.push_back(NumaNode{positive(n, "host_memory_gb_per_s", true) * kGiga});
  }
  if (m.numa.empty()) m.numa.push_back(NumaNode{0});  // one node, unbounded

  std::map<std::string, int32_t> switch_index;
  for (const YAML::Node& item : list_of_maps(r, "switches", "a PCIe switch: {name: S, uplink_gb_per_s: X}")) {
    const MapReader s(item, file, "switch " + std::to_string(m.switches.size()), kNoParams);
    s.check_keys({"name", "uplink_gb_per_s"}, "PCIe switch");
    PcieSwitch sw{s.required_string("name"), positive(s, "uplink_gb_per_s", true) * kGiga};
    if (!switch_index.emplace(sw.name, static_cast<int32_t>(m.switches.size())).second)
      s.fail(s.get("name"), fmt::format("switch '{}' is named twice", sw.name));
    m.switches.push_back(std::move(sw));
  }

  if (!r.has("gpus")) r.fail(root, "missing 'gpus' (the GPUs of a node, each {device: NAME, ...})");
  std::map<std::string, Device> devices;
  for (const YAML::Node& item : list_of_maps(r, "gpus", "a GPU: {device: NAME, switch: S, numa: N, count: K}")) {
    const MapReader g(item, file, "GPU " + std::to_string(m.gpus.size()), kNoParams);
    g.check_keys({"device", "switch", "numa", "count"}, "GPU");
    MachineGpu gpu;
    gpu.device_name = g.required_string("device");
    auto known = devices.find(gpu.device_name);
    if (known == devices.end()) {
      Result<Device> device = load_device(gpu.device_name);
      if (!device) g.fail(g.get("device"), device.error().message);
      known = devices.emplace(gpu.device_name, std::move(*device)).first;
    }
    gpu.device = known->second;
    if (g.has("switch")) {
      const std::string name = g.required_string("switch");
      auto it = switch_index.find(name);
      if (it == switch_index.end())
        g.fail(g.get("switch"), fmt::format("no switch '{}' in 'switches'", name));
      gpu.pcie_switch = it->second;
    }
    gpu.numa = static_cast<int32_t>(g.optional_int("numa", 0, 0));
    if (gpu.numa >= static_cast<int32_t>(m.numa.size()))
      g.fail(g.get("numa"), fmt::format("NUMA node {} is not in 'numa' ({} node{})", gpu.numa, m.numa.size(),
                                        m.numa.size() == 1 ? "" : "s"));
    const int64_t count = g.optional_int("count", 1, 1);
    if (static_cast<int64_t>(m.gpus.size()) + count > 1024)
      g.fail(g.has("count") ? g.get("count") : item, "a node has at most 1024 GPUs");
    for (int64_t k = 0; k < count; ++k) m.gpus.push_back(gpu);
  }
  if (m.gpus.empty()) r.fail(r.get("gpus"), "'gpus': a node needs at least one GPU");

  std::set<std::pair<int32_t, int32_t>> linked;
  for (const YAML::Node& item : list_of_maps(r, "nvlink", "an NVLink: {gpus: [A, B], gb_per_s: X}")) {
    const MapReader l(item, file, "NVLink " + std::to_string(m.nvlinks.size()), kNoParams);
    l.check_keys({"gpus", "gb_per_s"}, "NVLink");
    if (!l.has("gpus") || !l.get("gpus").IsSequence() || l.get("gpus").size() != 2)
      l.fail(l.has("gpus") ? l.get("gpus") : item, "'gpus': expected the two GPUs it joins, [A, B]");
    PeerLink link;
    link.a = static_cast<int32_t>(l.int_value(l.get("gpus")[0], "a GPU", 0));
    link.b = static_cast<int32_t>(l.int_value(l.get("gpus")[1], "a GPU", 0));
    const auto n = static_cast<int32_t>(m.gpus.size());
    if (link.a >= n || link.b >= n || link.a == link.b)
      l.fail(l.get("gpus"), fmt::format("'gpus': two different GPUs of the node's {} (0 .. {}), got [{}, {}]", n,
                                        n - 1, link.a, link.b));
    if (!linked.insert(std::minmax(link.a, link.b)).second)
      l.fail(l.get("gpus"), fmt::format("GPUs {} and {} are joined twice", link.a, link.b));
    link.bytes_per_s = positive(l, "gb_per_s", true) * kGiga;
    m.nvlinks.push_back(link);
  }
  m.nvswitch_bytes_per_s = positive(r, "nvswitch_gb_per_s", false) * kGiga;

  if (r.has("network")) {
    const YAML::Node node = r.get("network");
    if (!node.IsMap()) r.fail(node, "'network': expected {gb_per_s: X, latency_us: Y}");
    const MapReader n(node, file, "network", kNoParams);
    n.check_keys({"gb_per_s", "latency_us"}, "network");
    m.network = Network{positive(n, "gb_per_s", true) * kGiga, positive(n, "latency_us", true) / 1000.0};
  }
  if (m.nodes > 1 && !m.network)
    r.fail(r.get("nodes"), fmt::format("{} nodes need a 'network' between them ({{gb_per_s: X, latency_us: Y}})",
                                       m.nodes));
  return m;
}

}  // namespace

double Machine::host_link_bytes_per_s(int32_t g, bool to_device) const {
  const MachineGpu& gpu = gpus.at(static_cast<size_t>(g));
  const double own = to_device ? gpu.device.host_to_device_bytes_per_s : gpu.device.device_to_host_bytes_per_s;
  if (gpu.pcie_switch < 0) return own;
  return std::min(own, switches.at(static_cast<size_t>(gpu.pcie_switch)).uplink_bytes_per_s);
}

Result<Machine> parse_machine(const std::string& yaml_text, const std::string& file) {
  Result<YAML::Node> root = load_yaml_document(yaml_text, file, "a machine: a map of name, gpus, switches, ...");
  if (!root) return root.error();
  try {
    return read_machine(*root, file);
  } catch (const InputError& e) {
    return e.error;
  }
}

std::string machines_dir() {
  return (std::filesystem::path(install_paths().devices_dir).parent_path() / "machines").string();
}

std::vector<std::string> available_machines() { return yaml_names_in(machines_dir()); }

Result<Machine> load_machine(const std::string& name_or_path) {
  Result<std::string> path = shipped_file(name_or_path, machines_dir(), "machine");
  if (!path) return path.error();
  Result<std::string> text = read_input_file(*path, "the machine file", kMaxDeviceFileBytes);
  if (!text) return text.error();
  return parse_machine(*text, *path);
}

Machine standalone_machine(const Device& device, int32_t gpus) {
  Machine m;
  m.name = fmt::format("{}x{}", gpus, device.name);
  m.description = fmt::format("{} {} GPU(s), each with a PCIe link of its own", gpus, device.name);
  m.numa.push_back(NumaNode{0});
  for (int32_t g = 0; g < gpus; ++g) m.gpus.push_back(MachineGpu{device.name, device, -1, 0});
  return m;
}

}  // namespace mplan
