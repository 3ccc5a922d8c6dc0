// Machine files (docs/machine-format.md): the shipped ones load with their
// GPUs, switches and links; bad files say where and what; and the copies of
// several GPUs share the links they cross (profiler/link_sharing.h): two GPUs
// on one switch copying at once each take twice as long, on two switches
// each runs at full speed (multi-GPU vDNN, Section III).

#include "profiler/link_sharing.h"
#include "profiler/machine.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

Machine parse_or_die(const std::string& text) {
  Result<Machine> machine = parse_machine(text, "test.yaml");
  EXPECT_TRUE(machine.ok()) << machine.error().to_string();
  return machine.ok() ? *machine : Machine{};
}

TEST(Machine, EveryShippedMachineLoads) {
  const std::vector<std::string> names = available_machines();
  for (const char* wanted : {"p100x4-two-switches", "pcie-8gpu", "dgx-h100", "dgx-h100x2-infiniband"})
    EXPECT_NE(std::find(names.begin(), names.end(), wanted), names.end()) << wanted;
  for (const std::string& name : names) {
    Result<Machine> machine = load_machine(name);
    ASSERT_TRUE(machine.ok()) << machine.error().to_string();
    EXPECT_EQ(machine->name, name);
  }
  const Machine paper = *load_machine("p100x4-two-switches");
  ASSERT_EQ(paper.gpu_count(), 4);
  EXPECT_EQ(paper.switches.size(), 2u);
  EXPECT_EQ(paper.gpus[1].pcie_switch, 0);
  EXPECT_EQ(paper.gpus[2].pcie_switch, 1);
  EXPECT_EQ(paper.gpus[3].numa, 1);
  EXPECT_EQ(paper.gpus[0].device.name, "p100");
  const Machine two = *load_machine("dgx-h100x2-infiniband");
  EXPECT_EQ(two.gpu_count(), 16);
  ASSERT_TRUE(two.network.has_value());
  EXPECT_DOUBLE_EQ(two.network->bytes_per_s, 400e9);
  EXPECT_DOUBLE_EQ(two.network->latency_ms, 0.002);
  EXPECT_DOUBLE_EQ(two.nvswitch_bytes_per_s, 450e9);
  Result<Machine> unknown = load_machine("no-such-machine");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("dgx-h100"), std::string::npos) << unknown.error().message;
}

TEST(Machine, BadFilesSayWhereAndWhat) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name: m\n", "missing 'gpus'"},
      {"name: m\ngpus: []\n", "a node needs at least one GPU"},
      {"name: m\ngpus:\n  - {device: p100, switch: sw9}\n", "test.yaml:3:"},
      {"name: m\ngpus:\n  - {device: p100, switch: sw9}\n", "no switch 'sw9' in 'switches'"},
      {"name: m\ngpus:\n  - {device: p100, numa: 1}\n", "NUMA node 1 is not in 'numa' (1 node)"},
      {"name: m\ngpus:\n  - {device: nonesuch}\n", "device 'nonesuch': no such file"},
      {"name: m\ngpus:\n  - {device: p100, speed: 3}\n", "speed"},
      {"name: m\nswitches:\n  - {name: a, uplink_gb_per_s: 1}\n  - {name: a, uplink_gb_per_s: 1}\n"
       "gpus: [{device: p100}]\n",
       "switch 'a' is named twice"},
      {"name: m\nswitches: [{name: a, uplink_gb_per_s: -2}]\ngpus: [{device: p100}]\n", "must be a number > 0"},
      {"name: m\ngpus: [{device: p100, count: 2}]\nnvlink: [{gpus: [0, 0], gb_per_s: 25}]\n",
       "two different GPUs of the node's 2 (0 .. 1), got [0, 0]"},
      {"name: m\ngpus: [{device: p100, count: 2}]\nnvlink: [{gpus: [0, 1], gb_per_s: 25}, {gpus: [1, 0], "
       "gb_per_s: 25}]\n",
       "GPUs 1 and 0 are joined twice"},
      {"name: m\nnodes: 2\ngpus: [{device: p100}]\n", "2 nodes need a 'network'"},
      {"name: m\ngpus: [{device: p100}]\nnetwork: {gb_per_s: 10}\n", "missing 'latency_us'"},
      {"- a\n- b\n", "expected a machine"},
  };
  for (const auto& [text, expect] : cases) {
    Result<Machine> machine = parse_machine(text, "test.yaml");
    ASSERT_FALSE(machine.ok()) << text;
    const std::string message = machine.error().to_string();
    EXPECT_NE(message.find(expect), std::string::npos) << text << "\n" << message;
  }
}

// Two P100s whose switch uplink equals their own link (12.15 GB/s to the
// device), or two switches of one GPU each, and a host memory far faster.
const char* kTwoOnOneSwitch = R"(
name: two-on-one
switches: [{name: s, uplink_gb_per_s: 12.15}]
gpus: [{device: p100, switch: s, count: 2}]
)";
const char* kTwoSwitches = R"(
name: two-switches
switches: [{name: a, uplink_gb_per_s: 12.15}, {name: b, uplink_gb_per_s: 12.15}]
gpus: [{device: p100, switch: a}, {device: p100, switch: b}]
)";

TEST(LinkSharing, TwoGpusOnOneSwitchCopyingAtOnceEachTakeTwiceAsLong) {
  const Machine one = parse_or_die(kTwoOnOneSwitch);
  const double alone = shared_copy_rates(one, {{0, 0, true}}).at(0);
  EXPECT_DOUBLE_EQ(alone, 12.15e9);
  const std::vector<double> both = shared_copy_rates(one, {{0, 0, true}, {0, 1, true}});
  EXPECT_DOUBLE_EQ(both[0], alone / 2);
  EXPECT_DOUBLE_EQ(both[1], alone / 2);
  // Opposite directions do not share an uplink (each direction has its own).
  const std::vector<double> crossing = shared_copy_rates(one, {{0, 0, true}, {0, 1, false}});
  EXPECT_DOUBLE_EQ(crossing[0], 12.15e9);
  // (12.15 GB/s to the host: the uplink, below the device's own 12.89.)
  EXPECT_DOUBLE_EQ(crossing[1], one.host_link_bytes_per_s(1, false));
  EXPECT_DOUBLE_EQ(one.host_link_bytes_per_s(1, false), 12.15e9);
}

TEST(LinkSharing, OnTwoSwitchesEachCopyRunsAtFullSpeed) {
  const Machine two = parse_or_die(kTwoSwitches);
  const std::vector<double> both = shared_copy_rates(two, {{0, 0, true}, {0, 1, true}});
  EXPECT_DOUBLE_EQ(both[0], 12.15e9);
  EXPECT_DOUBLE_EQ(both[1], 12.15e9);
  // Without --machine every GPU has a link of its own.
  const Machine standalone = standalone_machine(two.gpus[0].device, 4);
  for (double rate : shared_copy_rates(standalone, {{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 3, false}}))
    EXPECT_GT(rate, 12e9);
}

TEST(LinkSharing, SharesAreMaxMinFairAcrossSwitchesAndHostMemory) {
  // Host memory of 20 GB/s under three copies: two on switch a (uplink
  // 12.15, so 6.075 each) and one alone on switch b, which takes what the
  // memory has left (20 - 12.15 = 7.85), less than its own link.
  const Machine m = parse_or_die(R"(
name: fair
numa: [{host_memory_gb_per_s: 20}]
switches: [{name: a, uplink_gb_per_s: 12.15}, {name: b, uplink_gb_per_s: 12.15}]
gpus: [{device: p100, switch: a, count: 2}, {device: p100, switch: b}]
)");
  const std::vector<double> rates = shared_copy_rates(m, {{0, 0, true}, {0, 1, true}, {0, 2, true}});
  EXPECT_NEAR(rates[0], 6.075e9, 1e3);
  EXPECT_NEAR(rates[1], 6.075e9, 1e3);
  EXPECT_NEAR(rates[2], 7.85e9, 1e3);
  // Copies on two nodes share nothing.
  Machine nodes = m;
  nodes.nodes = 2;
  nodes.network = Network{25e9, 0.002};
  const std::vector<double> apart = shared_copy_rates(nodes, {{0, 2, true}, {1, 2, true}});
  EXPECT_DOUBLE_EQ(apart[0], 12.15e9);
  EXPECT_DOUBLE_EQ(apart[1], 12.15e9);
}

// NCCL's ring: 2 (R - 1) / R of the bytes over the slowest hop, hops sharing links.
TEST(RingAllReduce, TakesTheSlowestHopsRateOverTwiceTheBytesLessAShare) {
  const int64_t bytes = int64_t{1} << 30;
  const Machine dgx = *load_machine("dgx-h100");
  const AllReduceCost nvswitch = ring_allreduce(dgx, 8, bytes);
  EXPECT_DOUBLE_EQ(nvswitch.ring_bytes_per_s, 450e9);
  EXPECT_STREQ(nvswitch.bottleneck, "NVSwitch");
  const double latency = dgx.gpus[0].device.copy_latency_ms;
  EXPECT_NEAR(nvswitch.ms, 2.0 * 7 / 8 * static_cast<double>(bytes) / 450e9 * 1e3 + 14 * latency, 1e-9);
  EXPECT_EQ(ring_allreduce(dgx, 1, bytes).ms, 0.0);
  // The paper's machine: the ring crosses each switch's uplink once each way,
  // which is wider than a P100's own link, so the GPUs' links bound it.
  const Machine paper = *load_machine("p100x4-two-switches");
  const AllReduceCost pcie = ring_allreduce(paper, 4, bytes);
  EXPECT_DOUBLE_EQ(pcie.ring_bytes_per_s, paper.gpus[0].device.host_to_device_bytes_per_s);
  EXPECT_STREQ(pcie.bottleneck, "PCIe");
  // A narrow uplink bounds the hops that cross it.
  Machine narrow = paper;
  for (PcieSwitch& s : narrow.switches) s.uplink_bytes_per_s = 4e9;
  const AllReduceCost uplink = ring_allreduce(narrow, 4, bytes);
  EXPECT_DOUBLE_EQ(uplink.ring_bytes_per_s, 4e9);
  EXPECT_STREQ(uplink.bottleneck, "PCIe switch uplink");
  EXPECT_GT(uplink.ms, pcie.ms);
  // Two ranks on one switch stay below its uplink.
  EXPECT_DOUBLE_EQ(ring_allreduce(narrow, 2, bytes).ring_bytes_per_s, paper.gpus[0].device.host_to_device_bytes_per_s);
  // Across nodes a hop also crosses the network, and pays its latency.
  Machine nodes = *load_machine("dgx-h100x2-infiniband");
  nodes.network->bytes_per_s = 10e9;
  const AllReduceCost network = ring_allreduce(nodes, 16, bytes);
  EXPECT_DOUBLE_EQ(network.ring_bytes_per_s, 10e9);
  EXPECT_STREQ(network.bottleneck, "network");
}

TEST(LinkSharing, MaxMinRatesGiveWhatATightLinkLeavesToTheOthers) {
  // Link 0 (10) carries flows a and b; link 1 (4) carries b alone; link 2 is unbounded.
  const std::vector<double> rates = max_min_rates({10, 4, 0}, {{0, 2}, {0, 1}});
  EXPECT_DOUBLE_EQ(rates[1], 4);
  EXPECT_DOUBLE_EQ(rates[0], 6);
}

}  // namespace
}  // namespace mplan
