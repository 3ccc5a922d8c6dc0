// 16-bit precision against fp32 (docs/model-format.md, "Precision"): for each
// model, at its batch, the unlimited plan's peak (moDNN's ideal case: the
// whole batch, fastest algorithms, no copies; what `mplan bounds --device`
// prints as "ideal memory") in fp32 and in bf16, and the largest batch whose
// unlimited plan fits the device's memory in each. Analytic H100 model
// (examples/devices/h100.yaml); the times are its predictions, not measurements.
//
//   build/bench/precision_bench [--models resnet50,vgg16,vit_b_16] [--device FILE] [--markdown FILE]
//
// Targets (kMemoryTarget, kBatchTarget): the bf16 peak at most 0.55x the
// fp32 one, the bf16 largest batch at least 1.8x the fp32 one. Then the
// planner at tight budgets in both precisions (--curve, default resnet50):
// one round (full-batch statistics) at a fraction F of the unlimited plan's
// memory, overhead over the unlimited plan, as docs/benchmarks-tight.md
// reports it for fp32 on the H200 profiles.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_args.h"
#include "core/bytes.h"
#include "driver/planned_model.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/ideal.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

constexpr double kMemoryTarget = 0.55;
constexpr double kBatchTarget = 1.8;
constexpr int64_t kLargestBatch = int64_t{1} << 16;

struct AtPrecision {
  int64_t peak_bytes = 0;  // the unlimited plan's at the model's batch
  double time_ms = 0;
  int64_t largest_batch = 0;  // whose unlimited plan fits the device
};

struct Row {
  std::string model;
  int64_t batch = 0;
  AtPrecision fp32, bf16;
};

const std::vector<double> kFractions = {0.65, 0.5, 0.4, 0.33, 0.25, 0.2};

// One precision's tight-budget curve: M, the unlimited time, and the overhead
// at each fraction (negative: infeasible).
struct Curve {
  Precision precision = Precision::fp32;
  int64_t memory_bytes = 0;
  double unlimited_ms = 0;
  std::vector<double> overhead;
  double seconds = 0;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "precision_bench: %s\n", message.c_str());
  std::exit(1);
}

// The largest batch whose ideal peak is at most `budget` (the peak grows
// with the batch: doubling, then bisection), 0 when not even one sample fits.
int64_t largest_batch(const Tdfg& tdfg, const CostModel& cost, int64_t budget) {
  auto fits = [&](int64_t b) { return ideal_run(tdfg, cost, b).peak_bytes <= budget; };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi <= kLargestBatch && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > kLargestBatch) return lo;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

AtPrecision measure(Model model, Precision precision, const Device& device) {
  if (Status s = apply_precision(model, precision, /*replace=*/true); !s) die(s.error().message);
  const Tdfg tdfg = build_tdfg(model);
  Result<MathMode> math = resolve_math_mode(device, model.math);
  if (!math) die(math.error().message);
  const AnalyticCostModel cost(device, *math);
  const IdealRun ideal = ideal_run(tdfg, cost, model.batch);
  return AtPrecision{ideal.peak_bytes, ideal.time_ms, largest_batch(tdfg, cost, device.memory_bytes)};
}

// As tight_memory_bench plans a cell: compile's plan (the plain model
// against its memory-saving variants), one round.
Curve curve(Model model, Precision precision, const Device& device) {
  if (Status s = apply_precision(model, precision, /*replace=*/true); !s) die(s.error().message);
  Result<MathMode> math = resolve_math_mode(device, model.math);
  if (!math) die(math.error().message);
  const AnalyticCostModel cost(device, *math);
  const auto started = std::chrono::steady_clock::now();
  auto plan = [&](int64_t budget, PlanOptions::BatchnormRounds rounds) {
    PlanOptions o;
    o.budget_bytes = budget;
    o.batchnorm_rounds = rounds;
    return driver::plan_model(model, true, o, [&](const Tdfg& t) { return plan_iteration(t, cost, o); }).planned;
  };
  Curve c;
  c.precision = precision;
  const Tdfg tdfg = build_tdfg(model);
  PlanOptions unlimited;
  unlimited.budget_bytes = device.memory_bytes;
  const PlanResult plain = plan_iteration(tdfg, cost, unlimited);
  if (!plain.feasible) die("the unlimited plan: " + plain.note);
  c.memory_bytes = plain.plan.resident_region_bytes + plain.plan.summary.peak_arena_bytes;
  const PlanResult best = plan(device.memory_bytes, PlanOptions::BatchnormRounds::prefer_one);
  c.unlimited_ms = std::min(plain.plan.summary.simulated_ms, best.plan.summary.simulated_ms);
  for (double f : kFractions) {
    const PlanResult r =
        plan(static_cast<int64_t>(f * static_cast<double>(c.memory_bytes)), PlanOptions::BatchnormRounds::one);
    c.overhead.push_back(r.feasible ? r.plan.summary.simulated_ms / c.unlimited_ms - 1 : -1);
    std::fprintf(stderr, "  %s F = %.2f: %s\n", precision_name(precision), f,
                 r.feasible ? fmt::format("{:+.1f}%", 100 * c.overhead.back()).c_str() : "infeasible");
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return c;
}

std::string verdict(double value, double target, bool at_most) {
  const bool met = at_most ? value <= target : value >= target;
  return met ? "met" : fmt::format("misses ({} {})", at_most ? "above" : "below", target);
}

std::string markdown(const std::vector<Row>& rows, const std::string& curve_model, const std::vector<Curve>& curves,
                     const Device& device, const std::string& command, double seconds) {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::string out = "# 16-bit precision against fp32\n\n";
  out += fmt::format(
      "Generated by `{}` ({}, {:.0f} s on the 2-core development machine). Analytic model of {} ({} of "
      "memory): predictions, not measurements. Peak: the unlimited plan's (the whole batch, the fastest "
      "algorithms, no copies; `mplan bounds --device h100 --precision P`'s \"ideal memory\"), weights included. "
      "Largest batch: the largest whose unlimited plan fits the device's memory. Targets: the bf16 peak at most "
      "{}x the fp32 one, the bf16 largest batch at least {}x the fp32 one (docs/model-format.md, \"Precision\").\n\n",
      command, date, seconds, device.name, format_bytes(device.memory_bytes), kMemoryTarget, kBatchTarget);
  out += "| model | batch | fp32 peak | bf16 peak | ratio | target | fp32 largest batch | bf16 largest batch | ratio | "
         "target | fp32 time | bf16 time |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const double memory = static_cast<double>(r.bf16.peak_bytes) / static_cast<double>(r.fp32.peak_bytes);
    const double batch = r.fp32.largest_batch > 0 ? static_cast<double>(r.bf16.largest_batch) /
                                                        static_cast<double>(r.fp32.largest_batch)
                                                  : 0;
    out += fmt::format("| {} | {} | {} | {} | {:.3f} | {} | {} | {} | {:.3f} | {} | {:.1f} ms | {:.1f} ms |\n",
                       r.model, r.batch, format_bytes(r.fp32.peak_bytes), format_bytes(r.bf16.peak_bytes), memory,
                       verdict(memory, kMemoryTarget, true), r.fp32.largest_batch, r.bf16.largest_batch, batch,
                       verdict(batch, kBatchTarget, false), r.fp32.time_ms, r.bf16.time_ms);
  }
  if (curves.empty()) return out;
  out += fmt::format(
      "\n## {} at tight budgets, one round\n\nThe plan at F x M (M: the unlimited plan's resident region plus "
      "its arena peak, in that precision), `--batchnorm one`; overhead over the unlimited plan's simulated time "
      "(docs/benchmarks-tight.md reports the fp32 curves on the H200 profiles). In 16 bits the step is shorter "
      "and the bytes fewer by less, so a copy over PCIe hides under less compute.\n\n| precision | M | unlimited |",
      curve_model);
  for (double f : kFractions) out += fmt::format(" F = {} |", f);
  out += " planner |\n|---|---|---|";
  for (size_t i = 0; i <= kFractions.size(); ++i) out += "---|";
  out += "\n";
  for (const Curve& c : curves) {
    out += fmt::format("| {} | {} | {:.1f} ms |", precision_name(c.precision), format_bytes(c.memory_bytes),
                       c.unlimited_ms);
    for (double o : c.overhead) out += o < 0 ? std::string(" infeasible |") : fmt::format(" {:+.1f}% |", 100 * o);
    out += fmt::format(" {:.0f} s |\n", c.seconds);
  }
  return out;
}

}  // namespace
}  // namespace mplan

int main(int argc, char** argv) {
  using namespace mplan;
  const std::string root = MPLAN_SOURCE_DIR;
  std::vector<std::string> models = {"resnet50", "vgg16", "vit_b_16"};
  std::string device_path = root + "/examples/devices/h100.yaml", markdown_path, curve_model = "resnet50";
  std::string command = "build/bench/precision_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--models" && i + 1 < argc) {
      models = bench::split_list(argv[++i]);
      command += " --models " + std::string(argv[i]);
    } else if (arg == "--device" && i + 1 < argc) {
      device_path = argv[++i];
      command += " --device " + device_path;
    } else if (arg == "--curve" && i + 1 < argc) {
      curve_model = argv[++i];
      command += " --curve " + curve_model;
    } else if (arg == "--markdown" && i + 1 < argc) {
      markdown_path = argv[++i];
      command += " --markdown " + markdown_path;
    } else {
      std::fprintf(stderr, "usage: precision_bench [--models a,b,...] [--device FILE] [--curve MODEL|none] "
                           "[--markdown FILE]\n");
      return 2;
    }
  }
  const Result<Device> device = load_device(device_path);
  if (!device) die(device.error().to_string());
  const auto start = std::chrono::steady_clock::now();
  std::vector<Row> rows;
  for (const std::string& m : models) {
    std::fprintf(stderr, "precision_bench: %s\n", m.c_str());
    Result<Model> model = load_model(root + "/examples/models/" + m + ".yaml");
    if (!model) die(model.error().to_string());
    rows.push_back(Row{m, model->batch, measure(*model, Precision::fp32, *device),
                       measure(*model, Precision::bf16, *device)});
  }
  std::vector<Curve> curves;
  if (curve_model != "none") {
    std::fprintf(stderr, "precision_bench: %s at tight budgets\n", curve_model.c_str());
    Result<Model> model = load_model(root + "/examples/models/" + curve_model + ".yaml");
    if (!model) die(model.error().to_string());
    for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) curves.push_back(curve(*model, p, *device));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = markdown(rows, curve_model, curves, *device, command, seconds);
  if (markdown_path.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream(markdown_path) << text;
    std::fprintf(stderr, "wrote %s\n", markdown_path.c_str());
  }
  return 0;
}
