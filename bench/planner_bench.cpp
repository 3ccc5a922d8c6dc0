// Planner benchmark: plans the papers' networks on the K40 device
// file (moDNN's GPU, moDNN §V) and prints, per model and budget,
// whether a plan exists, its sub-batch, simulated time / ideal, bytes moved
// each way and the planner's wall time; the planner's wall time as the graph
// grows (ResNet-50, -152, -1001, and the 2,500-unit ResNet when present); and
// the least budget make_plan accepts against the naive network-wide
// allocation (tdfg/bounds.h).
//
//   build/bench/planner_bench [--device k40] [--markdown docs/benchmarks-planner.md]
//                             [--only MODEL --budget 8GiB [--exhaustive] [--sub-batch N] [--dynamic]] [--quick]
//
// --only plans one model at one budget and prints its figures (for profiling);
// --exhaustive simulates every sub-batch candidate instead of screening them.
// --quick skips the minimum-budget search.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/workspace_mode.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/bounds.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

std::string model_path(const std::string& name) {
  return std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml";
}

struct Loaded {
  Model model;
  Tdfg tdfg;
};

// Models own their layers; the Tdfg points at the Model, so both live on the heap.
std::unique_ptr<Loaded> load(const std::string& name) {
  Result<Model> m = load_model(model_path(name));
  if (!m) {
    std::fprintf(stderr, "planner_bench: %s\n", m.error().to_string().c_str());
    return nullptr;
  }
  auto l = std::make_unique<Loaded>();
  l->model = std::move(*m);
  l->tdfg = build_tdfg(l->model);
  return l;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Row {
  std::string model;
  int64_t batch = 0;
  int64_t budget = 0;
  bool feasible = false;
  std::string error;
  int64_t sub_batch = 0;
  size_t rounds = 0;
  double ratio = 0;       // simulated / ideal
  double simulated_ms = 0, ideal_ms = 0;
  double gb_to_host = 0, gb_to_device = 0;
  int defrags = 0;
  double planner_ms = 0;  // wall time of make_plan
};

Row plan_row(const Loaded& l, const CostModel& cost, int64_t budget, PlanOptions options = {}) {
  Row row;
  row.model = l.model.name;
  row.batch = l.model.batch;
  row.budget = budget;
  options.budget_bytes = budget;
  double t0 = now_ms();
  Result<Plan> p = plan_iteration(l.tdfg, cost, options).take_plan();
  row.planner_ms = now_ms() - t0;
  if (!p) {
    row.error = p.error().message;
    return row;
  }
  row.feasible = true;
  row.sub_batch = p->sub_batch;
  row.rounds = p->sub_batches.size();
  row.simulated_ms = p->summary.simulated_ms;
  row.ideal_ms = p->summary.ideal_ms;
  row.ratio = p->summary.simulated_ms / p->summary.ideal_ms;
  row.gb_to_host = p->summary.bytes_to_host / 1e9;
  row.gb_to_device = p->summary.bytes_to_device / 1e9;
  row.defrags = p->summary.defragmentation_count;
  return row;
}

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kGiB); }

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "k40", markdown, only, only_budget = "8GiB";
  bool quick = false, exhaustive = false;
  int64_t only_sub_batch = 0;
  bool only_dynamic = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "planner_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") device_name = next();
    else if (a == "--markdown") markdown = next();
    else if (a == "--only") only = next();
    else if (a == "--budget") only_budget = next();
    else if (a == "--quick") quick = true;
    else if (a == "--exhaustive") exhaustive = true;
    else if (a == "--sub-batch") only_sub_batch = std::stoll(next());
    else if (a == "--dynamic") only_dynamic = true;
    else {
      std::fprintf(stderr, "planner_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  Result<Device> dev = load_device(device_name);
  if (!dev) {
    std::fprintf(stderr, "planner_bench: %s\n", dev.error().to_string().c_str());
    return 1;
  }
  AnalyticCostModel cost(*dev);

  if (!only.empty()) {
    auto l = load(only);
    if (!l) return 1;
    Result<int64_t> budget = parse_bytes(only_budget);
    if (!budget) {
      std::fprintf(stderr, "planner_bench: bad --budget\n");
      return 2;
    }
    PlanOptions o;
    o.screen_sub_batches = !exhaustive;
    o.sub_batch = only_sub_batch;
    if (only_dynamic) o.workspace = PlanOptions::Workspace::dynamic;
    Row r = plan_row(*l, cost, *budget, o);
    if (!r.feasible) std::printf("%s: infeasible: %s\n", only.c_str(), r.error.c_str());
    else
      std::printf("%s B=%lld at %s: b=%lld (%zu rounds) sim %.1f ms ideal %.1f ms ratio %.3f "
                  "to host %.2f GB to device %.2f GB defrag %d planner %.0f ms\n",
                  only.c_str(), (long long)r.batch, only_budget.c_str(), (long long)r.sub_batch, r.rounds,
                  r.simulated_ms, r.ideal_ms, r.ratio, r.gb_to_host, r.gb_to_device, r.defrags, r.planner_ms);
    return 0;
  }

  std::ostringstream md;
  md << "## Planner: simulated time, bytes moved, planner time\n\n";
  md << "Generated by `bench/planner_bench.cpp` (`planner_bench --markdown docs/benchmarks-planner.md`) on the "
     << "analytic cost model of the device file `"
     << std::filesystem::relative(dev->source_file, MPLAN_SOURCE_DIR).string() << "` (" << dev->description
     << ", " << dev->copy_engines << " copy engine(s)). Times are simulated by the planner; "
     << "\"ideal\" is unlimited memory, the whole batch as one sub-batch and the fastest algorithm of "
     << "every task (moDNN §V-B). The budget is the whole device memory the program may use "
     << "(weights, gradients and optimizer state included). Planner wall time was measured on the "
     << "machine that ran the bench, a shared 2-core build host, so it is indicative only.\n\n";

  // 1. The four networks of moDNN's Table/Fig. at 12, 8, 4 GiB.
  const std::vector<std::string> models = {"vgg16", "vgg19", "resnet34", "resnet50"};
  std::vector<std::unique_ptr<Loaded>> loaded;
  for (const std::string& m : models) {
    loaded.push_back(load(m));
    if (!loaded.back()) return 1;
  }
  md << "### Simulated time / ideal\n\n";
  md << "| model | batch | budget | plan | sub-batch (rounds) | simulated / ideal | GB to host | GB to device "
        "| defrag | planner ms |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|\n";
  std::printf("%-10s %5s %7s %5s %9s %7s %8s %8s %6s %10s\n", "model", "batch", "budget", "plan", "b(rounds)",
              "ratio", "GB->host", "GB->dev", "defrag", "planner_ms");
  for (int64_t budget_gib : {12, 8, 4}) {
    for (const auto& l : loaded) {
      Row r = plan_row(*l, cost, budget_gib * kGiB);
      if (r.feasible) {
        std::printf("%-10s %5lld %4lldGiB %5s %5lld(%zu) %7.3f %8.2f %8.2f %6d %10.0f\n", r.model.c_str(),
                    (long long)r.batch, (long long)budget_gib, "yes", (long long)r.sub_batch, r.rounds, r.ratio,
                    r.gb_to_host, r.gb_to_device, r.defrags, r.planner_ms);
        md << fmt::format("| {} | {} | {} GiB | yes | {} ({}) | {:.3f} | {:.2f} | {:.2f} | {} | {:.0f} |\n", r.model,
                          r.batch, budget_gib, r.sub_batch, r.rounds, r.ratio, r.gb_to_host, r.gb_to_device,
                          r.defrags, r.planner_ms);
      } else {
        std::printf("%-10s %5lld %4lldGiB %5s  %s\n", r.model.c_str(), (long long)r.batch, (long long)budget_gib,
                    "no", r.error.c_str());
        md << fmt::format("| {} | {} | {} GiB | no | | | | | | {:.0f} |\n", r.model, r.batch, budget_gib,
                          r.planner_ms);
      }
      std::fflush(stdout);
    }
  }

  // 2. Planner wall time as the graph grows.
  md << "\n### Planner wall time as the graph grows\n\n";
  md << "| model | tasks | batch | budget | sub-batch (rounds) | simulated / ideal | planner ms |\n";
  md << "|---|---|---|---|---|---|---|\n";
  std::printf("\n%-12s %6s %5s %7s %9s %7s %10s\n", "model", "tasks", "batch", "budget", "b(rounds)", "ratio",
              "planner_ms");
  for (const std::string name : {"resnet50", "resnet152", "resnet1001", "resnet2500"}) {
    if (!std::filesystem::exists(model_path(name))) {
      std::printf("%-12s (no examples/models/%s.yaml)\n", name.c_str(), name.c_str());
      continue;
    }
    auto l = load(name);
    if (!l) return 1;
    for (int64_t budget_gib : {8, 4}) {
      Row r = plan_row(*l, cost, budget_gib * kGiB);
      std::printf("%-12s %6zu %5lld %4lldGiB %5lld(%zu) %7.3f %10.0f%s\n", name.c_str(), l->tdfg.tasks.size(),
                  (long long)r.batch, (long long)budget_gib, (long long)r.sub_batch, r.rounds, r.ratio, r.planner_ms,
                  r.feasible ? "" : "  infeasible");
      md << fmt::format("| {} | {} | {} | {} GiB | {} | {} | {:.0f} |\n", name, l->tdfg.tasks.size(), r.batch,
                        budget_gib, r.feasible ? fmt::format("{} ({})", r.sub_batch, r.rounds) : "infeasible",
                        r.feasible ? fmt::format("{:.3f}", r.ratio) : "", r.planner_ms);
      std::fflush(stdout);
    }
  }

  // 3. Least feasible budget against the naive network-wide allocation.
  if (!quick) {
    md << "\n### Least feasible budget\n\n";
    md << "moDNN's Eq. 2 minimum (`mplan bounds`: the resident region and the largest task's blocks at "
          "sub-batch 1, each aligned as plans place it), checked by planning there (mplan plans at it by "
          "construction), against the naive allocation, every block of the network alive at once at the "
          "full batch (tdfg/bounds.h, `naive_bytes`), and the liveness peak (blocks freed after their last "
          "use, no offloading). In-place ReLU and flatten are part of every TDFG here.\n\n";
    md << "| model | batch | naive | liveness peak | least feasible budget | plans there | naive / least |\n";
    md << "|---|---|---|---|---|---|---|\n";
    std::printf("\n%-10s %5s %12s %12s %12s %6s %8s\n", "model", "batch", "naive", "liveness", "least", "plans",
                "ratio");
    for (const auto& l : loaded) {
      MemoryBounds bounds = compute_bounds(l->tdfg, l->model.batch);
      const int64_t least = bounds.modnn_min_bytes;
      PlanOptions o;
      o.budget_bytes = least;
      o.batchnorm_rounds = PlanOptions::BatchnormRounds::any;
      const bool plans = plan_iteration(l->tdfg, cost, o).take_plan().ok();
      double ratio = static_cast<double>(bounds.naive_bytes) / static_cast<double>(least);
      std::printf("%-10s %5lld %12s %12s %12s %6s %8.1f\n", l->model.name.c_str(), (long long)l->model.batch,
                  gib(bounds.naive_bytes).c_str(), gib(bounds.liveness_peak_bytes).c_str(), gib(least).c_str(),
                  plans ? "yes" : "no", ratio);
      md << fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f}x |\n", l->model.name, l->model.batch,
                        gib(bounds.naive_bytes), gib(bounds.liveness_peak_bytes), gib(least), plans ? "yes" : "no",
                        ratio);
      std::fflush(stdout);
    }
  }

  // 4. mu-cuDNN micro-batching: undivided vs dynamic at 8 GiB.
  md << "\n### Micro-batched convolutions: undivided vs dynamic (8 GiB)\n\n";
  md << "`dynamic`: every conv task also chooses among its desirable micro-batch configurations "
        "(mu-cuDNN §III-C1, powerOfTwo sizes) by moDNN's gain (Eq. 5). Same planner otherwise.\n\n";
  md << "| model | batch | workspace | sub-batch (rounds) | simulated / ideal | micro-batched tasks | planner ms |\n";
  md << "|---|---|---|---|---|---|---|\n";
  std::printf("\n%-10s %5s %10s %9s %7s %6s %10s\n", "model", "batch", "workspace", "b(rounds)", "ratio", "micro",
              "planner_ms");
  int dynamic_faster = 0, dynamic_rows = 0;
  for (const std::string name : {"vgg16", "resnet50"}) {
    double undivided_ms = 0;
    auto l = load(name);
    if (!l) return 1;
    for (auto mode : {PlanOptions::Workspace::undivided, PlanOptions::Workspace::dynamic}) {
      PlanOptions o;
      o.budget_bytes = 8 * kGiB;
      o.workspace = mode;
      double t0 = now_ms();
      Result<Plan> p = plan_iteration(l->tdfg, cost, o).take_plan();
      double ms = now_ms() - t0;
      const char* mode_name = mode == PlanOptions::Workspace::dynamic ? "dynamic" : "undivided";
      if (!p) {
        std::printf("%-10s infeasible: %s\n", name.c_str(), p.error().message.c_str());
        continue;
      }
      if (mode == PlanOptions::Workspace::undivided) {
        undivided_ms = p->summary.simulated_ms;
      } else {
        ++dynamic_rows;
        if (p->summary.simulated_ms < undivided_ms) ++dynamic_faster;
      }
      int micro = 0;
      for (const TaskChoice& c : p->choices) micro += c.micro_batches.empty() ? 0 : 1;
      double ratio = p->summary.simulated_ms / p->summary.ideal_ms;
      std::printf("%-10s %5lld %10s %5lld(%zu) %7.3f %6d %10.0f\n", name.c_str(), (long long)p->batch, mode_name,
                  (long long)p->sub_batch, p->sub_batches.size(), ratio, micro, ms);
      md << fmt::format("| {} | {} | {} | {} ({}) | {:.3f} | {} | {:.0f} |\n", name, p->batch, mode_name,
                        p->sub_batch, p->sub_batches.size(), ratio, micro, ms);
      std::fflush(stdout);
    }
  }

  md << "\n" << (dynamic_faster == 0
                     ? "Dynamic micro-batching made no plan faster here (the sub-batch lever already lets every "
                       "conv run its fastest undivided algorithm at these budgets) and costs planner time: so "
                       "the default, `auto`, searches micro-batches only where a conv's fastest workspace does "
                       "not fit (docs/planner.md).\n"
                     : fmt::format("Dynamic micro-batching made {} of {} plans faster; the default, `auto`, "
                                   "searches micro-batches where a conv's fastest workspace does not fit "
                                   "(docs/planner.md).\n",
                                   dynamic_faster, dynamic_rows));

  // 5. Workspace modes (planner/workspace_mode.h).
  md << "\n### Workspace modes\n\n";
  md << "`mplan compile MODEL --budget B --workspace MODE`: `wr:64MiB` gives each conv kernel its WR optimum "
        "under 64 MiB (powerOfTwo micro-batch sizes); `wd:auto` reserves a pool at the top of the arena and "
        "gives each kernel its WR optimum under the pool (one compute stream runs one kernel at a time, so that "
        "is the exact optimum of WD's objective), pool sizes 0, 64 MiB, 256 MiB, 1 GiB, 4 GiB (while the rest "
        "of the arena holds the largest task) and the largest fastest workspace at each sub-batch candidate, "
        "fastest plan kept. Micro-batched: choices (task, round) run as two or more micro-batches. Every plan "
        "passed the verifier in the tests; planner ms is make_plan's wall time here.\n\n";
  md << "| model | batch | budget | workspace | sub-batch (rounds) | simulated ms | simulated / ideal | "
        "micro-batched | largest workspace | planner ms |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string name : {"vgg16", "resnet50"}) {
    auto l = load(name);
    if (!l) return 1;
    for (int64_t budget_gib : {8, 4}) {
      for (const std::string mode : {"undivided", "dynamic", "wd:auto", "wr:64MiB"}) {
        Result<WorkspaceMode> m = parse_workspace_mode(mode);
        PlanOptions o;
        o.budget_bytes = budget_gib * kGiB;
        o.workspace = m->use;
        o.workspace_bytes = m->bytes;
        const double t0 = now_ms();
        Result<Plan> p = plan_iteration(l->tdfg, cost, o).take_plan();
        const double ms = now_ms() - t0;
        if (!p) {
          md << fmt::format("| {} | {} | {} GiB | {} | infeasible | | | | | {:.0f} |\n", name, l->model.batch,
                            budget_gib, mode, ms);
          continue;
        }
        int micro = 0;
        int64_t largest = 0;
        for (const TaskChoice& c : p->choices) {
          micro += c.micro_batches.size() >= 2 ? 1 : 0;
          largest = std::max(largest, c.workspace_bytes);
        }
        md << fmt::format("| {} | {} | {} GiB | {} | {} ({}) | {:.1f} | {:.3f} | {} | {:.0f} MiB | {:.0f} |\n", name,
                          p->batch, budget_gib, mode, p->sub_batch, p->sub_batches.size(), p->summary.simulated_ms,
                          p->summary.simulated_ms / p->summary.ideal_ms, micro,
                          static_cast<double>(largest) / kMiB, ms);
        std::printf("%s %lld GiB %s: %.1f ms\n", name.c_str(), (long long)budget_gib, mode.c_str(),
                    p->summary.simulated_ms);
        std::fflush(stdout);
      }
    }
  }

  if (!markdown.empty()) {
    std::ofstream out(markdown);
    if (!out) {
      std::fprintf(stderr, "planner_bench: cannot write %s\n", markdown.c_str());
      return 1;
    }
    out << md.str();
    std::printf("\nwrote %s\n", markdown.c_str());
  }
  return 0;
}
