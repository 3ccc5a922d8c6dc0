#pragma once
// How concurrent transfers of several GPUs share the links they cross
// (docs/machine-format.md, "Shared links"). Host copies cross each GPU's own
// PCIe link per direction, its PCIe switch's uplink per direction, and its
// NUMA node's host memory (both directions together); GPU-to-GPU transfers
// cross NVLink, an NVSwitch, PCIe switches or the network. Multi-GPU vDNN
// (papers/multi-gpu-vdnn.txt, Section III): "if N GPUs are connected to the
// same PCIe Switch, transferring data to the CPU should share the bandwidth
// of PCIe, thus total transfer time is N times longer". Rates are max-min
// fair: every transfer gets an equal share of its tightest link, and what it
// cannot use there goes to the others (progressive filling).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/machine.h"

namespace mplan {

struct HostCopy {
  int32_t node = 0;  // the machine's node
  int32_t gpu = 0;   // the GPU of that node
  bool to_device = true;
};

// The links of a machine and the paths transfers take over them, so that
// host copies and all-reduce hops of all ranks can be priced together
// (max_min_rates over capacity() and the paths). Ranks are node-major: rank
// r is GPU r % gpus of node r / gpus.
class LinkPaths {
 public:
  explicit LinkPaths(const Machine& machine) : machine_(machine) {}
  // A host copy: the GPU's own PCIe link and its switch's uplink in the
  // copy's direction, and its NUMA node's memory (both directions share it).
  std::vector<int32_t> host_copy(const HostCopy& copy);
  // One hop of a ring from rank `from` to rank `to`: NVSwitch ports, an
  // NVLink, PCIe peer to peer (below the switch, or up one uplink and down
  // another), or out of one node and into the next over the network.
  // `latency_ms` gets the hop's latency.
  std::vector<int32_t> ring_hop(int32_t from, int32_t to, double* latency_ms);
  // A link of its own (a flow's own top speed).
  int32_t private_link(double bytes_per_s);
  const std::vector<double>& capacity() const { return capacity_; }
  const std::string& name(int32_t link) const { return names_.at(static_cast<size_t>(link)); }
  // What a link is, in words: "NVSwitch", "NVLink", "PCIe switch uplink",
  // "network", "host memory", "PCIe", or "own speed".
  const char* kind(int32_t link) const;
  // The link in words: "node 0 switch sw0 uplink, to the host".
  std::string describe(int32_t link) const;
  const Machine& machine() const { return machine_; }

 private:
  int32_t get(const std::string& name, double capacity);
  void pcie_path(int32_t node, int32_t g, int direction, bool through_uplink, std::vector<int32_t>* path);
  const Machine& machine_;
  std::map<std::string, int32_t> index_;
  std::vector<double> capacity_;
  std::vector<std::string> names_;
};

// The rate in bytes/s of each copy while all of them run at once.
std::vector<double> shared_copy_rates(const Machine& machine, const std::vector<HostCopy>& copies);

// Max-min fair rates of flows over links: `capacity[l]` in bytes/s (0:
// unbounded), `links_of[f]` the links flow f crosses (at least one bounded).
std::vector<double> max_min_rates(const std::vector<double>& capacity,
                                  const std::vector<std::vector<int32_t>>& links_of);

// The ring all-reduce of `bytes` over the first `ranks` GPUs of the machine
// (node-major), as NCCL's ring algorithm runs it: every rank sends and
// receives 2 (R - 1) / R of the bytes to and from its ring neighbours, so the
// time is that over the slowest hop's rate, with every hop running at once
// (hops share the links they cross), plus 2 (R - 1) hop latencies.
struct AllReduceCost {
  double ms = 0;
  double ring_bytes_per_s = 0;  // the slowest hop's rate
  const char* bottleneck = "";  // "NVSwitch", "NVLink", "PCIe", "PCIe switch uplink", "network"
};
AllReduceCost ring_allreduce(const Machine& machine, int32_t ranks, int64_t bytes);

}  // namespace mplan
