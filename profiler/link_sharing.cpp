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

// Links by name: a GPU's own PCIe link per direction, a switch's uplink per
// direction, a NUMA node's memory, NVLink and NVSwitch ports, the network.
class Links {
 public:
  int32_t get(const std::string& name, double capacity) {
    auto [it, added] = index_.emplace(name, static_cast<int32_t>(capacity_.size()));
    if (added) {
      capacity_.push_back(capacity);
      names_.push_back(name);
    }
    return it->second;
  }
  const std::vector<double>& capacity() const { return capacity_; }
  const std::string& name(int32_t l) const { return names_.at(static_cast<size_t>(l)); }

 private:
  std::map<std::string, int32_t> index_;
  std::vector<double> capacity_;
  std::vector<std::string> names_;
};

std::string key(const char* kind, int32_t node, int32_t index, int direction) {
  return std::string(kind) + "/" + std::to_string(node) + "/" + std::to_string(index) + "/" +
         std::to_string(direction);
}

// The host side of a GPU's PCIe path in one direction (0: towards the GPU).
void pcie_path(const Machine& m, Links& links, int32_t node, int32_t g, int direction, bool through_uplink,
               std::vector<int32_t>* path) {
  const MachineGpu& gpu = m.gpus.at(static_cast<size_t>(g));
  path->push_back(links.get(key("pcie", node, g, direction), direction == 0 ? gpu.device.host_to_device_bytes_per_s
                                                                            : gpu.device.device_to_host_bytes_per_s));
  if (through_uplink && gpu.pcie_switch >= 0)
    path->push_back(links.get(key("uplink", node, gpu.pcie_switch, direction),
                              m.switches.at(static_cast<size_t>(gpu.pcie_switch)).uplink_bytes_per_s));
}

}  // namespace

std::vector<double> shared_copy_rates(const Machine& machine, const std::vector<HostCopy>& copies) {
  Links links;
  std::vector<std::vector<int32_t>> paths;
  for (const HostCopy& copy : copies) {
    std::vector<int32_t> path;
    pcie_path(machine, links, copy.node, copy.gpu, copy.to_device ? 0 : 1, true, &path);
    const MachineGpu& gpu = machine.gpus.at(static_cast<size_t>(copy.gpu));
    path.push_back(links.get(key("memory", copy.node, gpu.numa, 0),
                             machine.numa.at(static_cast<size_t>(gpu.numa)).host_memory_bytes_per_s));
    paths.push_back(std::move(path));
  }
  return max_min_rates(links.capacity(), paths);
}

AllReduceCost ring_allreduce(const Machine& machine, int32_t ranks, int64_t bytes) {
  AllReduceCost cost;
  if (ranks <= 1 || bytes <= 0) return cost;
  const auto per_node = static_cast<int32_t>(machine.gpus.size());
  Links links;
  std::vector<std::vector<int32_t>> hops;
  double latency_ms = 0;
  for (int32_t r = 0; r < ranks; ++r) {
    const int32_t s = (r + 1) % ranks;
    const int32_t node = r / per_node, next_node = s / per_node, a = r % per_node, b = s % per_node;
    const MachineGpu& from = machine.gpus.at(static_cast<size_t>(a));
    std::vector<int32_t> path;
    double hop_latency = from.device.copy_latency_ms;
    if (node != next_node) {
      // Leaves its node and enters the next through their PCIe links and the network.
      pcie_path(machine, links, node, a, 1, true, &path);
      path.push_back(links.get(key("network-out", node, 0, 0), machine.network ? machine.network->bytes_per_s : 0));
      path.push_back(links.get(key("network-in", next_node, 0, 0), machine.network ? machine.network->bytes_per_s : 0));
      pcie_path(machine, links, next_node, b, 0, true, &path);
      hop_latency = machine.network ? machine.network->latency_ms : hop_latency;
    } else if (machine.nvswitch_bytes_per_s > 0) {
      path.push_back(links.get(key("nvswitch-out", node, a, 0), machine.nvswitch_bytes_per_s));
      path.push_back(links.get(key("nvswitch-in", node, b, 0), machine.nvswitch_bytes_per_s));
    } else {
      const auto link = std::find_if(machine.nvlinks.begin(), machine.nvlinks.end(), [&](const PeerLink& l) {
        return (l.a == a && l.b == b) || (l.a == b && l.b == a);
      });
      if (link != machine.nvlinks.end()) {
        path.push_back(links.get(key("nvlink", node, std::min(a, b) * per_node + std::max(a, b), a < b ? 0 : 1),
                                 link->bytes_per_s));
      } else {
        // Peer to peer over PCIe: within one switch it stays below the
        // uplinks; across switches it goes up one and down the other.
        const int32_t sa = from.pcie_switch, sb = machine.gpus.at(static_cast<size_t>(b)).pcie_switch;
        const bool through_uplinks = sa < 0 || sb < 0 || sa != sb;
        pcie_path(machine, links, node, a, 1, through_uplinks, &path);
        pcie_path(machine, links, node, b, 0, through_uplinks, &path);
      }
    }
    latency_ms = std::max(latency_ms, hop_latency);
    hops.push_back(std::move(path));
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
      const std::string& name = links.name(l);
      cost.bottleneck = name.rfind("nvswitch", 0) == 0  ? "NVSwitch"
                        : name.rfind("nvlink", 0) == 0  ? "NVLink"
                        : name.rfind("uplink", 0) == 0  ? "PCIe switch uplink"
                        : name.rfind("network", 0) == 0 ? "network"
                                                        : "PCIe";
    }
  }
  const double share = 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  cost.ms = share * static_cast<double>(bytes) / cost.ring_bytes_per_s * 1e3 +
            2.0 * static_cast<double>(ranks - 1) * latency_ms;
  return cost;
}

}  // namespace mplan
