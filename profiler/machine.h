#pragma once
// A machine of several GPUs as the multi-GPU planner sees it
// (docs/machine-format.md): the GPUs of a node, each a device file, and the
// links they share -- PCIe switches and their uplinks to the host, NUMA nodes
// and their host-memory bandwidth, NVLink or an NVSwitch between GPUs, and the
// network between nodes. Multi-GPU vDNN (papers/multi-gpu-vdnn.txt, Section
// III) is why: GPUs behind one PCIe switch share its uplink, so copies that
// overlap take longer. Machine files live in examples/machines/<name>.yaml.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "profiler/device.h"

namespace mplan {

struct PcieSwitch {
  std::string name;
  double uplink_bytes_per_s = 0;  // to the host, per direction, shared by its GPUs
};

struct MachineGpu {
  std::string device_name;  // as the file gives it: a shipped device name or a path
  Device device;
  int32_t pcie_switch = -1;  // index into Machine::switches; -1: a PCIe link of its own
  int32_t numa = 0;          // index into Machine::numa
};

struct NumaNode {
  double host_memory_bytes_per_s = 0;  // what every copy to or from this node's memory shares
};

struct PeerLink {  // NVLink between two GPUs of a node
  int32_t a = 0, b = 0;
  double bytes_per_s = 0;  // per direction
};

struct Network {  // between nodes
  double bytes_per_s = 0;  // per node, per direction
  double latency_ms = 0;
};

struct Machine {
  std::string name;
  std::string description;
  std::string source_file;
  int32_t nodes = 1;              // every node alike
  std::vector<MachineGpu> gpus;   // of one node
  std::vector<PcieSwitch> switches;
  std::vector<NumaNode> numa;     // at least one
  std::vector<PeerLink> nvlinks;
  double nvswitch_bytes_per_s = 0;  // every GPU of a node to every other, per direction; 0: none
  std::optional<Network> network;   // required with more than one node

  int32_t gpu_count() const { return nodes * static_cast<int32_t>(gpus.size()); }
  // The host-link bandwidth GPU g (of a node) has alone, per direction: the
  // lesser of its device's and its switch's uplink.
  double host_link_bytes_per_s(int32_t g, bool to_device) const;
};

// Parses a machine file's text; `file` names it in messages, which give line
// and column. Device names are loaded as load_device does (a path, or a
// shipped device file's name).
Result<Machine> parse_machine(const std::string& yaml_text, const std::string& file);

// A path, else a name in the shipped machine files (examples/machines); the
// error for an unknown name lists them.
Result<Machine> load_machine(const std::string& name_or_path);

// The machine of `gpus` GPUs of `device` on one node without --machine: each
// GPU with a PCIe link of its own (its device's bandwidth), one NUMA node
// whose memory bandwidth no copy pattern reaches, no NVLink.
Machine standalone_machine(const Device& device, int32_t gpus);

// The folder of the shipped machine files and the names in it, sorted.
std::string machines_dir();
std::vector<std::string> available_machines();

}  // namespace mplan
