#include "profiler/link_sharing.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>

namespace mplan {

std::vector<double> max_min_rates(const std::vector<double>& capacity,
                                  const std::vector<std::vector<int32_t>>& links_of) {
  std::vector<std::vector<size_t>> flows_on(capacity.size());
  for (size_t f = 0; f < links_of.size(); ++f)
    for (int32_t l : links_of[f]) flows_on.at(static_cast<size_t>(l)).push_back(f);
  // Progressive filling: raise every unfixed flow's rate together; the link
  // that fills first fixes its flows at its fair share of what is left.
  std::vector<double> rate(links_of.size(), 0.0);
  std::vector<bool> fixed(links_of.size(), false);
  size_t left = links_of.size();
  while (left > 0) {
    double share = std::numeric_limits<double>::infinity();
    int64_t tightest = -1;
    for (size_t l = 0; l < capacity.size(); ++l) {
      if (capacity[l] <= 0) continue;
      double used = 0;
      int64_t open = 0;
      for (size_t f : flows_on[l]) {
        if (fixed[f]) used += rate[f];
        else ++open;
      }
      if (open == 0) continue;
      const double fair = std::max(0.0, capacity[l] - used) / static_cast<double>(open);
      if (fair < share) {
        share = fair;
        tightest = static_cast<int64_t>(l);
      }
    }
    if (tightest < 0) break;  // the flows left cross only unbounded links
    for (size_t f : flows_on[static_cast<size_t>(tightest)])
      if (!fixed[f]) {
        rate[f] = share;
        fixed[f] = true;
        --left;
      }
  }
  return rate;
}

namespace {

std::string key(const char* kind, int32_t node, int32_t index, int direction) {
  return std::string(kind) + "/" + std::to_string(node) + "/" + std::to_string(index) + "/" +
         std::to_string(direction);
}

}  // namespace

int32_t LinkPaths::get(const std::string& name, double capacity) {
  auto [it, added] = index_.emplace(name, static_cast<int32_t>(capacity_.size()));
  if (added) {
    capacity_.push_back(capacity);
    names_.push_back(name);
  }
  return it->second;
}

int32_t LinkPaths::private_link(double bytes_per_s) {
  return get("own/" + std::to_string(capacity_.size()), bytes_per_s);
}

const char* LinkPaths::kind(int32_t link) const {
  const std::string& n = name(link);
  if (n.rfind("nvswitch", 0) == 0) return "NVSwitch";
  if (n.rfind("nvlink", 0) == 0) return "NVLink";
  if (n.rfind("uplink", 0) == 0) return "PCIe switch uplink";
  if (n.rfind("network", 0) == 0) return "network";
  if (n.rfind("memory", 0) == 0) return "host memory";
  if (n.rfind("own", 0) == 0) return "own speed";
  return "PCIe";
}

std::string LinkPaths::describe(int32_t link) const {
  const std::string& n = name(link);
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t slash = n.find('/'); slash != std::string::npos; slash = n.find('/', from)) {
    parts.push_back(n.substr(from, slash - from));
    from = slash + 1;
  }
  parts.push_back(n.substr(from));
  if (parts.size() != 4) return n;
  const std::string node = "node " + parts[1];
  const int index = std::stoi(parts[2]);
  const char* direction = parts[3] == "0" ? "to the device" : "to the host";
  if (parts[0] == "pcie") return node + " GPU " + parts[2] + " PCIe link, " + direction;
  if (parts[0] == "uplink")
    return node + " switch " + machine_.switches.at(static_cast<size_t>(index)).name + " uplink, " + direction;
  if (parts[0] == "memory") return node + " NUMA " + parts[2] + " host memory";
  if (parts[0] == "nvswitch-out") return node + " GPU " + parts[2] + " NVSwitch port, out";
  if (parts[0] == "nvswitch-in") return node + " GPU " + parts[2] + " NVSwitch port, in";
  if (parts[0] == "network-out") return node + " network, out";
  if (parts[0] == "network-in") return node + " network, in";
  if (parts[0] == "nvlink") {
    const auto per_node = static_cast<int>(machine_.gpus.size());
    return node + " NVLink GPU " + std::to_string(index / per_node) + " - GPU " + std::to_string(index % per_node);
  }
  return n;
}

// The host side of a GPU's PCIe path in one direction (0: towards the GPU).
void LinkPaths::pcie_path(int32_t node, int32_t g, int direction, bool through_uplink, std::vector<int32_t>* path) {
  const MachineGpu& gpu = machine_.gpus.at(static_cast<size_t>(g));
  path->push_back(get(key("pcie", node, g, direction), direction == 0 ? gpu.device.host_to_device_bytes_per_s
                                                                     : gpu.device.device_to_host_bytes_per_s));
  if (through_uplink && gpu.pcie_switch >= 0)
    path->push_back(get(key("uplink", node, gpu.pcie_switch, direction),
                        machine_.switches.at(static_cast<size_t>(gpu.pcie_switch)).uplink_bytes_per_s));
}

std::vector<int32_t> LinkPaths::host_copy(const HostCopy& copy) {
  std::vector<int32_t> path;
  pcie_path(copy.node, copy.gpu, copy.to_device ? 0 : 1, true, &path);
  const MachineGpu& gpu = machine_.gpus.at(static_cast<size_t>(copy.gpu));
  path.push_back(get(key("memory", copy.node, gpu.numa, 0),
                     machine_.numa.at(static_cast<size_t>(gpu.numa)).host_memory_bytes_per_s));
  return path;
}

std::vector<int32_t> LinkPaths::ring_hop(int32_t from, int32_t to, double* latency_ms) {
  const Machine& machine = machine_;
  const auto per_node = static_cast<int32_t>(machine.gpus.size());
  const int32_t node = from / per_node, next_node = to / per_node, a = from % per_node, b = to % per_node;
  const MachineGpu& gpu_a = machine.gpus.at(static_cast<size_t>(a));
  std::vector<int32_t> path;
  *latency_ms = gpu_a.device.copy_latency_ms;
  if (node != next_node) {
    // Leaves its node and enters the next through their PCIe links and the network.
    pcie_path(node, a, 1, true, &path);
    const double network = machine.network ? machine.network->bytes_per_s : 0;
    path.push_back(get(key("network-out", node, 0, 0), network));
    path.push_back(get(key("network-in", next_node, 0, 0), network));
    pcie_path(next_node, b, 0, true, &path);
    if (machine.network) *latency_ms = machine.network->latency_ms;
  } else if (machine.nvswitch_bytes_per_s > 0) {
    path.push_back(get(key("nvswitch-out", node, a, 0), machine.nvswitch_bytes_per_s));
    path.push_back(get(key("nvswitch-in", node, b, 0), machine.nvswitch_bytes_per_s));
  } else {
    const auto link = std::find_if(machine.nvlinks.begin(), machine.nvlinks.end(), [&](const PeerLink& l) {
      return (l.a == a && l.b == b) || (l.a == b && l.b == a);
    });
    if (link != machine.nvlinks.end()) {
      path.push_back(get(key("nvlink", node, std::min(a, b) * per_node + std::max(a, b), a < b ? 0 : 1),
                         link->bytes_per_s));
    } else {
      // Peer to peer over PCIe: within one switch it stays below the
      // uplinks; across switches it goes up one and down the other.
      const int32_t sa = gpu_a.pcie_switch, sb = machine.gpus.at(static_cast<size_t>(b)).pcie_switch;
      const bool through_uplinks = sa < 0 || sb < 0 || sa != sb;
      pcie_path(node, a, 1, through_uplinks, &path);
      pcie_path(node, b, 0, through_uplinks, &path);
    }
  }
  return path;
}

std::vector<double> shared_copy_rates(const Machine& machine, const std::vector<HostCopy>& copies) {
  LinkPaths links(machine);
  std::vector<std::vector<int32_t>> paths;
  for (const HostCopy& copy : copies) paths.push_back(links.host_copy(copy));
  return max_min_rates(links.capacity(), paths);
}

AllReduceCost ring_allreduce(const Machine& machine, int32_t ranks, int64_t bytes) {
  AllReduceCost cost;
  if (ranks <= 1 || bytes <= 0) return cost;
  LinkPaths links(machine);
  std::vector<std::vector<int32_t>> hops;
  double latency_ms = 0;
  for (int32_t r = 0; r < ranks; ++r) {
    double hop_latency = 0;
    hops.push_back(links.ring_hop(r, (r + 1) % ranks, &hop_latency));
    latency_ms = std::max(latency_ms, hop_latency);
  }
  const std::vector<double> rates = max_min_rates(links.capacity(), hops);
  size_t slowest = 0;
  for (size_t h = 1; h < rates.size(); ++h)
    if (rates[h] < rates[slowest]) slowest = h;
  cost.ring_bytes_per_s = rates[slowest];
  // The bottleneck: the slowest hop's link with the least capacity per hop crossing it.
  std::vector<int32_t> crossing(links.capacity().size(), 0);
  for (const std::vector<int32_t>& path : hops)
    for (int32_t l : path) ++crossing[static_cast<size_t>(l)];
  double tightest = std::numeric_limits<double>::infinity();
  for (int32_t l : hops[slowest]) {
    const double c = links.capacity()[static_cast<size_t>(l)] / crossing[static_cast<size_t>(l)];
    if (c > 0 && c < tightest) {
      tightest = c;
      cost.bottleneck = links.kind(l);
    }
  }
  const double share = 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  cost.ms = share * static_cast<double>(bytes) / cost.ring_bytes_per_s * 1e3 +
            2.0 * static_cast<double>(ranks - 1) * latency_ms;
  return cost;
}

}  // namespace mplan
