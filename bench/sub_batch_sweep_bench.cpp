// Sub-batch sweep (docs/planner.md, "near-optimal sub-batch choice"): for each
// model, device, budget and copy-engine setting, plans every sub-batch size b
// in 1..B with mplan's planner (the sub-batch fixed, every other lever
// searched as usual), keeps the fastest point of the sweep, and reports
// mplan's own choice (the sub-batch left to its search) against it. The gap
// is mplan / best - 1; the target is at most 1% on every row.
//
//   build/bench/sub_batch_sweep_bench [--models vgg16,resnet50,...] [--device k40]
//       [--budgets 12GiB,8GiB,4GiB] [--batch B] [--h100] [--threads 2] [--markdown FILE] [--append]
//
// Batchnorm models are searched with --batchnorm any (by time alone), as the
// sweep's fixed sub-batches are: the sweep measures the sub-batch choice, not
// the batchnorm rule. --h100: the H100 file at 80 GiB, each model at the
// smallest power-of-two multiple of its batch whose ideal run needs more.

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_args.h"
#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/policy.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;

struct Row {
  std::string model;
  std::string device;
  int64_t batch = 0;
  int64_t budget_bytes = 0;
  int engines = 2;
  int64_t feasible_points = 0;
  int64_t best_b = 0;
  double best_ms = 0;
  int64_t mplan_b = 0;
  double mplan_ms = 0;
  double ideal_ms = 0;
  double sweep_s = 0;
  bool mplan_feasible = false;
};

Row sweep(const std::string& name, const Model& model, const Tdfg& tdfg, const CostModel& cost,
          const std::string& device, int64_t budget, int engines, int threads) {
  Row row;
  row.model = name;
  row.device = device;
  row.batch = model.batch;
  row.budget_bytes = budget;
  row.engines = engines;
  const auto started = std::chrono::steady_clock::now();
  PlanOptions base;
  base.budget_bytes = budget;
  base.copy_engines = engines;
  base.batchnorm_rounds = PlanOptions::BatchnormRounds::any;
  Result<Plan> own = plan_iteration(tdfg, cost, base).take_plan();
  if (own.ok()) {
    row.mplan_feasible = true;
    row.mplan_b = own->sub_batch;
    row.mplan_ms = own->summary.simulated_ms;
    row.ideal_ms = own->summary.ideal_ms;
  }
  std::vector<double> ms(static_cast<size_t>(model.batch) + 1, -1);
  std::atomic<int64_t> next{1};
  auto work = [&] {
    for (int64_t b = next++; b <= model.batch; b = next++) {
      PlanOptions o = base;
      o.sub_batch = b;
      Result<Plan> p = plan_iteration(tdfg, cost, o).take_plan();
      if (p.ok()) ms[b] = p->summary.simulated_ms;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < std::max(1, threads); ++i) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  for (int64_t b = 1; b <= model.batch; ++b) {
    if (ms[b] < 0) continue;
    ++row.feasible_points;
    if (row.best_b == 0 || ms[b] < row.best_ms) {
      row.best_ms = ms[b];
      row.best_b = b;
    }
  }
  row.sweep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return row;
}

std::string line(const Row& r) {
  const double gap = r.mplan_feasible && r.best_b > 0 ? 100.0 * (r.mplan_ms / r.best_ms - 1) : NAN;
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} ({:.1f} ms) | {} ({:.1f} ms) | {:.2f}% | {:.1f}% | {:.0f} |",
                     r.model, r.device, r.batch, format_bytes(r.budget_bytes), r.engines, r.feasible_points,
                     r.best_b, r.best_ms, r.mplan_b, r.mplan_ms, gap,
                     r.ideal_ms > 0 ? 100.0 * (r.mplan_ms / r.ideal_ms - 1) : 0.0, r.sweep_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"cifar_small", "alexnet", "vgg16", "resnet18", "resnet50", "googlenet",
                                     "densenet121"};
  std::string device_name = "k40";
  std::vector<std::string> budgets = {"12GiB", "8GiB", "4GiB"};
  int64_t batch = 0;
  int threads = 2;
  bool h100 = false, append = false;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") models = bench::split_list(value());
    else if (a == "--device") device_name = value();
    else if (a == "--budgets") budgets = bench::split_list(value());
    else if (a == "--batch") batch = std::stoll(value());
    else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--markdown") markdown = value();
    else if (a == "--append") append = true;
    else if (a == "--h100") h100 = true;
    else {
      std::fprintf(stderr, "usage: sub_batch_sweep_bench [--models a,b] [--device D] [--budgets 12GiB,...] "
                           "[--batch B] [--h100] [--threads N] [--markdown FILE] [--append]\n");
      return 2;
    }
  }
  if (h100) {
    device_name = "h100";
    budgets = {"80GiB"};
  }
  Result<Device> device = load_device(device_name);
  if (!device) {
    std::fprintf(stderr, "%s\n", device.error().to_string().c_str());
    return 2;
  }
  const AnalyticCostModel cost(*device);
  std::vector<std::string> lines;
  for (const std::string& name : models) {
    Result<Model> loaded = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
    if (!loaded) {
      std::fprintf(stderr, "%s\n", loaded.error().to_string().c_str());
      return 2;
    }
    Model model = std::move(loaded).value();
    if (batch > 0) model.batch = batch;
    for (const std::string& text : budgets) {
      Result<int64_t> budget = parse_bytes(text);
      if (!budget) {
        std::fprintf(stderr, "--budgets: %s\n", budget.error().message.c_str());
        return 2;
      }
      if (h100) {  // the smallest power-of-two multiple of the batch that does not fit
        Tdfg probe = build_tdfg(model);
        while (ideal_budget_bytes(probe, cost, model.batch) <= *budget) {
          model.batch *= 2;
          probe = build_tdfg(model);
        }
      }
      const Tdfg tdfg = build_tdfg(model);
      for (int engines : {2, 1}) {
        const Row row = sweep(name, model, tdfg, cost, device->name, *budget, engines, threads);
        lines.push_back(line(row));
        std::printf("%s\n", lines.back().c_str());
        std::fflush(stdout);
      }
    }
  }
  if (!markdown.empty()) {
    std::ofstream out(markdown, append ? std::ios::app : std::ios::trunc);
    for (const std::string& l : lines) out << l << "\n";
  }
  return 0;
}
