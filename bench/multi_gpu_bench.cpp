// Data-parallel plans on machines of several GPUs (docs/multi-gpu.md), in
// simulation: every figure is a joint step of all ranks priced on the
// machine's shared links (planner/data_parallel/rank_timing.h).
//
// 1. Multi-GPU vDNN (papers/multi-gpu-vdnn.txt, Tables II and III) on its
//    machine, four P100s (16 GB) on two PCIe switches (examples/machines/
//    p100x4-two-switches.yaml), VGG-16: images per second per GPU without
//    swapping (the ideal plan, where it fits), with vDNN's swapping on every
//    GPU alike ("original"), with the paper's staggering (Step 3), and with
//    mplan's plan. The paper's batches are scaled to this model's memory:
//    its Non-Swap maximum (120 on two GPUs, 110 on four) maps to the largest
//    batch the ideal plan fits here, the other rows keep their ratios to it.
// 2. Scaling: ResNet-50 and VGG-16 on 1, 2, 4 and 8 GPUs of the PCIe server
//    (pcie-8gpu) and the NVSwitch node (dgx-h100), the per-GPU batch fixed
//    (weak scaling), at the unlimited plan's memory and at half of it: the
//    step and the scaling efficiency (one GPU's step over N GPUs' step).
//
//   build/bench/multi_gpu_bench [--part paper|scaling|all] [--markdown FILE]

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/data_parallel/data_parallel.h"
#include "planner/planner.h"
#include "profiler/analytic_model.h"
#include "profiler/machine.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;

constexpr int64_t kGiB = int64_t{1} << 30;

Model load(const std::string& name, int64_t batch) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
  if (!model) {
    fmt::print(stderr, "multi_gpu_bench: {}\n", model.error().to_string());
    std::exit(1);
  }
  model->batch = batch;
  return *model;
}

// The joint step of `ranks` ranks of `policy` (ms), or nothing where no plan fits.
std::optional<RankPlans> joint(const Tdfg& tdfg, const CostModel& cost, const Machine& machine, PolicyKind policy,
                               int64_t budget, int32_t ranks, Stagger stagger) {
  PlanOptions options;
  options.budget_bytes = budget;
  options.policy = policy;
  PlanResult alone = plan_iteration(tdfg, cost, options);
  if (!alone.feasible) return std::nullopt;
  DataParallelOptions dp;
  dp.ranks = ranks;
  dp.stagger = stagger;
  return plan_data_parallel(tdfg, cost, machine, options, dp, std::move(alone));
}

// ---- 1: the paper's tables --------------------------------------------------------------

struct PaperRow {
  int64_t paper_batch;
  double paper[3];  // Non-Swap (0: out of memory), Swap original, Swap optimized: images/s per GPU
};

const std::vector<PaperRow> kTableII = {
    {120, {83.56, 56.33, 81.14}}, {130, {0, 56.66, 84.14}}, {140, {0, 58.86, 86.65}}, {150, {0, 60.12, 88.15}}};
const std::vector<PaperRow> kTableIII = {
    {110, {66.53, 51.06, 68.31}}, {120, {0, 52.49, 70.11}}, {130, {0, 53.09, 70.24}}, {140, {0, 54.86, 70.36}}};

std::string rate(double images_per_s) {
  return images_per_s > 0 ? fmt::format("{:.1f}", images_per_s) : "out of memory";
}

std::string paper_table(const Machine& machine, int32_t ranks, const std::vector<PaperRow>& rows, int64_t largest,
                        const char* title) {
  const AnalyticCostModel cost(machine.gpus[0].device);
  const int64_t budget = 16 * kGiB;
  std::string out = fmt::format("### {}\n\n", title), notes;
  out += "| batch per GPU (paper) | here | Non-Swap | Swap original | Swap optimized | mplan | paper: Non-Swap | "
         "Swap original | Swap optimized |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const PaperRow& row : rows) {
    const auto batch = static_cast<int64_t>(std::lround(static_cast<double>(largest) * row.paper_batch /
                                                        static_cast<double>(rows[0].paper_batch)));
    const Model model = load("vgg16", batch);
    const Tdfg tdfg = build_tdfg(model);
    auto images = [&](PolicyKind policy, Stagger stagger) {
      std::optional<RankPlans> r = joint(tdfg, cost, machine, policy, budget, ranks, stagger);
      return r ? 1e3 * static_cast<double>(batch) / r->timing.step_ms : 0.0;
    };
    // Non-Swap: the ideal plan where it fits the GPU (its copies are the input's alone).
    const int64_t need = ideal_budget_bytes(tdfg, cost, batch);
    const double none = need <= budget ? images(PolicyKind::ideal, Stagger::none) : 0;
    if (none > 0 && batch > largest)
      notes += fmt::format("At batch {} the ideal plan fits again: it needs {}, less than at {} ({}), because the "
                           "fastest algorithms of its first convolutions change at this batch (in the P100's "
                           "model, FFT instead of non-fused Winograd) and need less workspace; vDNN's dynamic "
                           "policy then swaps nothing either.\n",
                           batch, format_bytes(need), largest + 2,
                           format_bytes(ideal_budget_bytes(build_tdfg(load("vgg16", largest + 2)), cost, largest + 2)));
    const double original = images(PolicyKind::vdnn_dyn, Stagger::none);
    const double staggered = images(PolicyKind::vdnn_dyn, Stagger::paper);
    const double mplan = images(PolicyKind::mplan, Stagger::search);
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", row.paper_batch, batch, rate(none),
                       rate(original), rate(staggered), rate(mplan), rate(row.paper[0]), rate(row.paper[1]),
                       rate(row.paper[2]));
    std::fflush(stdout);
    fmt::print(stderr, "  {} GPUs, batch {}: done\n", ranks, batch);
  }
  return out + "\n" + notes + (notes.empty() ? "" : "\n");
}

std::string paper_part() {
  const Machine machine = *load_machine("p100x4-two-switches");
  const AnalyticCostModel cost(machine.gpus[0].device);
  // The largest batch the ideal plan fits in 16 GB: the Non-Swap maximum here.
  int64_t largest = 0;
  for (int64_t b = 64; b <= 512; b += 2) {
    const Model model = load("vgg16", b);
    if (ideal_budget_bytes(build_tdfg(model), cost, b) > 16 * kGiB) break;
    largest = b;
  }
  std::string out = fmt::format(
      "## Multi-GPU vDNN's tables (VGG-16, 4 x P100 16 GB on two PCIe switches)\n\n"
      "Images per second per GPU. Here: simulated steps of `p100x4-two-switches` (the P100's analytic model), the "
      "largest batch without swapping is {} (the paper's 120 and 110 map to it); the paper: measured with "
      "TensorFlow, gradients summed on the CPU. Swap original: vDNN's dynamic policy (`vdnn-dyn`) on every GPU "
      "alike; Swap optimized: the same with the paper's Step 3 (`--stagger paper`); mplan: `--policy mplan` with its "
      "own search (`--stagger search`). The relative shape is the target, not the absolute rates: the paper's "
      "GPUs ran TensorFlow's kernels.\n\n",
      largest);
  out += paper_table(machine, 2, kTableII, largest, "Table II: two GPUs (one switch)");
  out += paper_table(machine, 4, kTableIII, largest, "Table III: four GPUs (two switches)");
  return out;
}

// ---- 2: scaling -------------------------------------------------------------------------

std::string scaling_part() {
  struct Case {
    const char* model;
    int64_t batch;  // per GPU
  };
  const std::vector<Case> cases = {{"resnet50", 128}, {"vgg16", 64}};
  std::string out =
      "## Scaling (weak: the batch per GPU fixed)\n\n"
      "Simulated joint steps on the machine files; efficiency is one GPU's step over N GPUs' step. M is one GPU's "
      "unlimited plan's memory (its resident region and arena peak); \"half\" plans at 0.5 M per GPU. The all-reduce "
      "is NCCL's ring of 25 MiB buckets overlapped with the backward pass.\n\n"
      "| model | batch per GPU | machine | memory | 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const char* machine_name : {"pcie-8gpu", "dgx-h100"}) {
    const Machine machine = *load_machine(machine_name);
    const AnalyticCostModel cost(machine.gpus[0].device);
    for (const Case& c : cases) {
      const Model model = load(c.model, c.batch);
      const Tdfg tdfg = build_tdfg(model);
      const int64_t unlimited = ideal_budget_bytes(tdfg, cost, c.batch);
      for (const double fraction : {1.0, 0.5}) {
        const auto budget = static_cast<int64_t>(fraction * static_cast<double>(unlimited));
        std::string cells;
        double one = 0;
        for (const int32_t ranks : {1, 2, 4, 8}) {
          std::optional<RankPlans> r = joint(tdfg, cost, machine, PolicyKind::mplan, budget, ranks, Stagger::search);
          if (!r) {
            cells += " | infeasible";
            continue;
          }
          if (ranks == 1) one = r->timing.step_ms;
          cells += fmt::format(" | {:.1f} ms ({:.0f}%)", r->timing.step_ms, 100.0 * one / r->timing.step_ms);
        }
        out += fmt::format("| {} | {} | {} | {} ({}){} |\n", c.model, c.batch, machine_name,
                           fraction == 1.0 ? "M" : "M / 2", format_bytes(budget), cells);
        fmt::print(stderr, "  {} on {} at {}: done\n", c.model, machine_name, fraction);
      }
    }
  }
  out += "\nFor comparison, PyTorch DDP's published cost of the all-reduce for ResNet-50 on 8 V100s with NVLink is "
         "about +7% of the step (Li et al., \"PyTorch Distributed\", VLDB 2020); the NVSwitch rows above are the "
         "corresponding figure here.\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "all", markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--part" && i + 1 < argc) {
      part = argv[++i];
    } else if (flag == "--markdown" && i + 1 < argc) {
      markdown = argv[++i];
    } else {
      fmt::print(stderr, "usage: multi_gpu_bench [--part paper|scaling|all] [--markdown FILE]\n");
      return 2;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::string body;
  if (part == "paper" || part == "all") body += paper_part();
  if (part == "scaling" || part == "all") body += scaling_part();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::string command = "build/bench/multi_gpu_bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const std::string text = fmt::format(
      "# Several GPUs, in simulation\n\nGenerated by `{}` ({}, {:.0f} s on this 2-core machine). Every figure is "
      "simulated (analytic cost models of the machine files' GPUs, docs/multi-gpu.md); none is measured on GPUs.\n\n{}",
      command, date, seconds, body);
  if (markdown.empty()) {
    fmt::print("{}", text);
  } else {
    std::ofstream(markdown) << text;
    fmt::print("wrote {}\n", markdown);
  }
  return 0;
}
