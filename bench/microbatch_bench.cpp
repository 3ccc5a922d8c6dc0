// Micro-batched convolutions (issue 6, papers/mu-cudnn-microbatching.txt):
// on a device file's analytic cost model, per network, the total time of its
// convolution kernels (forward, backward-data, backward-filter) at per-kernel
// workspace limits of 8, 64 and 512 MiB (the paper's, §IV):
//   undivided        plain cuDNN: the fastest algorithm that fits, whole batch;
//   WR powerOfTwo    §III-B with micro-batches 1, 2, 4, ..., B;
//   WR all           §III-B with every micro-batch size;
//   WD               §III-C: one pool of (limit × kernels), the same total,
//                    split by the 0-1 ILP over desirable sets (GLPK);
// with the workspace each actually uses, and the ILP's size and GLPK's solve
// time (the paper's Fig. 13-14 and "562 variables, 5.46 ms" for ResNet-50).
//
//   build-*/bench/microbatch_bench [--device p100] [--models alexnet,resnet50]
//                                  [--dump-lp FILE]
//
// --dump-lp FILE writes each WD problem in CPLEX LP format to
// MODEL_LIMITMiB_FILE (e.g. alexnet_64MiB_wd.lp). Times are the cost model's, not measured on a GPU.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/bytes.h"
#include "frontend/parse.h"
#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"
#include "planner/microbatch/wd_optimizer.h"
#include "planner/microbatch/wr_optimizer.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;
using namespace mplan::microbatch;

constexpr int64_t kMiB = int64_t{1} << 20;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Loaded {
  Model model;
  Tdfg tdfg;
};

std::unique_ptr<Loaded> load(const std::string& name) {
  Result<Model> m = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
  if (!m) {
    std::fprintf(stderr, "microbatch_bench: %s\n", m.error().to_string().c_str());
    return nullptr;
  }
  auto l = std::make_unique<Loaded>();
  l->model = std::move(*m);
  l->tdfg = build_tdfg(l->model);
  return l;
}

// Sum over kernels of one WR policy's configurations.
struct Totals {
  double time_ms = 0;
  int64_t workspace_bytes = 0;  // Σ of the kernels' workspaces
  int64_t divided_kernels = 0;  // kernels run as more than one micro-batch
  bool ok = true;
  std::string error;
};

Totals run_wr(const std::vector<BenchmarkTable>& tables, int64_t batch, int64_t limit,
              BatchSizePolicy policy) {
  Totals t;
  for (const BenchmarkTable& table : tables) {
    Result<Configuration> c = optimize_wr(table, batch, limit, policy);
    if (!c) {
      t.ok = false;
      t.error = c.error().message;
      return t;
    }
    t.time_ms += c->time_ms();
    t.workspace_bytes += c->workspace_bytes();
    t.divided_kernels += c->micro_batch_count() > 1;
  }
  return t;
}

void bench_model(const std::string& name, const CostModel& cost, const std::string& dump_lp) {
  std::unique_ptr<Loaded> l = load(name);
  if (!l) return;
  const int64_t batch = l->model.batch;
  const std::vector<TaskId> kernels = convolution_kernels(l->tdfg);
  const int64_t n = static_cast<int64_t>(kernels.size());

  // Benchmark tables with every micro-batch size (policy all; the others use a subset).
  auto start = std::chrono::steady_clock::now();
  std::vector<BenchmarkTable> tables;
  for (TaskId t : kernels)
    tables.push_back(table_from_cost_model(cost, l->tdfg, t, micro_batch_sizes(BatchSizePolicy::all, batch)));
  const double tables_ms = ms_since(start);

  std::printf("\n## %s: batch %lld, %lld convolution kernels (cost tables for %lld sizes: %.0f ms)\n\n",
              name.c_str(), static_cast<long long>(batch), static_cast<long long>(n),
              static_cast<long long>(batch), tables_ms);
  std::printf("| limit/kernel | undivided ms | WR powerOfTwo ms | WR all ms | WD pool | WD ms | "
              "WD used | WR all used | undivided used | ILP vars | rows | desirable DP ms | GLPK ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t limit_mib : {8, 64, 512}) {
    const int64_t limit = limit_mib * kMiB;
    const Totals undivided = run_wr(tables, batch, limit, BatchSizePolicy::undivided);
    const Totals pow2 = run_wr(tables, batch, limit, BatchSizePolicy::power_of_two);
    const Totals all = run_wr(tables, batch, limit, BatchSizePolicy::all);
    if (!undivided.ok || !pow2.ok || !all.ok) {
      std::printf("| %lld MiB | error: %s |\n", static_cast<long long>(limit_mib),
                  (!undivided.ok ? undivided : !pow2.ok ? pow2 : all).error.c_str());
      continue;
    }
    // WD: the same total workspace as WR, one pool.
    const int64_t pool = limit * n;
    start = std::chrono::steady_clock::now();
    std::vector<WdKernel> wd_kernels;
    for (const BenchmarkTable& table : tables)
      wd_kernels.push_back({table.kernel, desirable_configurations(table, batch, BatchSizePolicy::all, pool)});
    const double desirable_ms = ms_since(start);
    if (!dump_lp.empty()) {
      const std::string path = fmt::format("{}_{}MiB_{}", name, limit_mib, dump_lp);
      const Status s = dump_wd_lp(wd_kernels, pool, path);
      std::fprintf(stderr, "%s\n", s ? ("wrote " + path).c_str() : s.error().to_string().c_str());
    }
    const Result<WdSolution> wd = optimize_wd(wd_kernels, {pool, /*verbose=*/false});
    if (!wd) {
      std::printf("| %lld MiB | WD error: %s |\n", static_cast<long long>(limit_mib),
                  wd.error().message.c_str());
      continue;
    }
    auto speedup = [&](double ms) { return fmt::format("{:.2f} ({:.2f}x)", ms, undivided.time_ms / ms); };
    std::printf("| %lld MiB | %.2f | %s | %s | %s | %s | %s | %s | %s | %d | %d | %.1f | %.2f |\n",
                static_cast<long long>(limit_mib), undivided.time_ms, speedup(pow2.time_ms).c_str(),
                speedup(all.time_ms).c_str(), format_bytes(pool).c_str(),
                speedup(wd->total_time_ms).c_str(), format_bytes(wd->total_workspace_bytes).c_str(),
                format_bytes(all.workspace_bytes).c_str(), format_bytes(undivided.workspace_bytes).c_str(),
                wd->binary_variables, wd->rows, desirable_ms, wd->solve_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "p100";
  std::string models = "alexnet,resnet50";
  std::string dump_lp;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--device" || arg == "--models" || arg == "--dump-lp") && i + 1 < argc) {
      (arg == "--device" ? device_name : arg == "--models" ? models : dump_lp) = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--device NAME] [--models a,b] [--dump-lp FILE]\n", argv[0]);
      return 2;
    }
  }
  Result<Device> device = load_device(device_name);
  if (!device) {
    std::fprintf(stderr, "microbatch_bench: %s\n", device.error().to_string().c_str());
    return 1;
  }
  const AnalyticCostModel cost(*device);
  std::printf("# micro-batched convolutions on %s\n", cost.describe().c_str());
  std::stringstream list(models);
  std::string name;
  while (std::getline(list, name, ',')) bench_model(name, cost, dump_lp);
  return 0;
}
