// Tight memory with full-batch statistics (docs/planner.md, "The planner's
// targets"): for every example model with a GPU profile
// (examples/profiles/<model>-h200.json), the plan at a fraction F of the
// unlimited plan's memory M (its resident region plus its arena peak), in
// one round (--batchnorm one: the statistics plain training computes), and
// its overhead over the unlimited plan's simulated time. The default plan
// (--batchnorm prefer-one, which may split the batch) is reported beside it.
//
//   build/bench/tight_memory_bench [--models resnet50,...] [--fractions 0.25,0.2] [--one-round-only]
//                                  [--markdown FILE]
//
// --fractions keeps some of the columns; --one-round-only plans the one-round
// table alone (the quick check of a planner change).
//
// The targets (worst overhead allowed, one round) are in kTargets; a row
// says "met" or by how much it misses and where the lower bound at its
// budget lies (planner/lower_bound.h): above the target, no plan meets it.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_args.h"
#include "core/bytes.h"
#include "driver/planned_model.h"
#include "frontend/parse.h"
#include "planner/lower_bound.h"
#include "planner/planner.h"
#include "profiler/profile.h"
#include "tdfg/bounds.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;

const std::vector<double> kAllFractions = {0.65, 0.5, 0.4, 0.33, 0.25, 0.2};
// The columns planned: indices into kAllFractions (and kTargets' rows).
std::vector<size_t> columns;
// Worst overhead allowed at each fraction, one round; models without a row use "other".
const std::map<std::string, std::vector<double>> kTargets = {
    {"resnet50", {0.03, 0.05, 0.08, 0.11, 0.16, 0.22}},   {"resnet152", {0.03, 0.05, 0.08, 0.11, 0.16, 0.22}},
    {"densenet121", {0.03, 0.05, 0.07, 0.10, 0.15, 0.20}}, {"vgg16", {0.02, 0.02, 0.04, 0.05, 0.08, 0.12}},
};

struct Cell {
  size_t compact_layers = 0;  // layers planned with their memory-saving backward
  bool feasible = false;
  double overhead = 0;
  size_t rounds = 0;
  int32_t recomputed = 0;
  int64_t bytes_copied = 0;
  double planner_s = 0;
  double above_bound = -1;  // the plan's time over the lower bound at its budget, -1: none
  // The lower bound over the unlimited plan's time, -1: none. Above a target, no
  // plan at this budget meets it (within the cost model).
  double bound_overhead = -1;
};

struct Row {
  std::string model;
  int64_t batch = 0;
  int64_t memory_bytes = 0;  // M
  double unlimited_ms = 0;
  std::vector<Cell> one_round, default_plan;
  std::vector<Cell> cheap_only;  // one round, --no-recompute-convolutions
  std::vector<Cell> plain_only;  // one round, --no-memory-saving-variants
  std::vector<Cell> unrefined;   // one round, --no-refinement
};

// Which levers a cell turns off.
struct Levers {
  bool recompute_convolutions = true;
  bool variants = true;
  bool refine = true;
};

// A plan as compile makes it (driver/planned_model.h: the plain model
// against its memory-saving variants).
Cell plan_cell(const Model& model, const CostModel& cost, int64_t budget, PlanOptions::BatchnormRounds rounds,
               double unlimited_ms, Levers levers = {}) {
  PlanOptions o;
  o.recompute_convolutions = levers.recompute_convolutions;
  o.refine_blocks = levers.refine;
  o.budget_bytes = budget;
  o.batchnorm_rounds = rounds;
  const auto started = std::chrono::steady_clock::now();
  const driver::PlannedModel planned = driver::plan_model(
      model, levers.variants, o, [&](const Tdfg& candidate) { return plan_iteration(candidate, cost, o); });
  const PlanResult& r = planned.planned;
  Cell c;
  c.compact_layers = planned.compact_layers.size();
  c.planner_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  c.feasible = r.feasible;
  if (!r.feasible) return c;
  c.overhead = r.plan.summary.simulated_ms / unlimited_ms - 1;
  c.rounds = r.plan.sub_batches.size();
  c.recomputed = r.recomputed_tasks;
  c.bytes_copied = r.plan.summary.bytes_to_host + r.plan.summary.bytes_to_device;
  const IterationLowerBound bound = driver::lower_bound_over_models(model, cost, budget, r.plan.batch);
  if (bound.found) {
    c.above_bound = r.plan.summary.simulated_ms / bound.ms - 1;
    c.bound_overhead = bound.ms / unlimited_ms - 1;
  }
  return c;
}

std::string cell_text(const Cell& c) {
  if (!c.feasible) return "infeasible";
  std::string text = fmt::format("{:+.1f}%", 100 * c.overhead);
  if (c.rounds > 1) text += fmt::format(" ({} rounds)", c.rounds);
  return text;
}

std::string target_text(const std::string& model, size_t i, const Cell& c) {
  auto it = kTargets.find(model);
  if (it == kTargets.end()) return "";
  const double target = it->second[columns[i]];
  if (!c.feasible) return fmt::format(" ≤ {:.0f}%: infeasible", 100 * target);
  if (c.overhead <= target + 1e-9) return fmt::format(" ≤ {:.0f}%: met", 100 * target);
  std::string text = fmt::format(" ≤ {:.0f}%: {:+.1f} points", 100 * target, 100 * (c.overhead - target));
  // A miss is the planner's where the lower bound leaves room below the target.
  if (c.bound_overhead >= 0)
    text += fmt::format(" (bound {:+.1f}%{})", 100 * c.bound_overhead,
                        c.bound_overhead > target + 1e-9 ? ": out of reach" : "");
  return text;
}

// A section with one row per model and one column per fraction.
std::string fraction_table(const std::vector<Row>& rows, const std::string& title, std::vector<Cell> Row::*cells) {
  if (rows.empty() || (rows.front().*cells).empty()) return "";  // not planned (--one-round-only)
  std::string out = "\n## " + title + "\n\n| model |";
  for (size_t i : columns) out += fmt::format(" F = {} |", kAllFractions[i]);
  out += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---|";
  out += "\n";
  for (const Row& r : rows) {
    out += "| " + r.model + " |";
    for (const Cell& c : r.*cells) out += " " + cell_text(c) + " |";
    out += "\n";
  }
  return out;
}

std::string markdown(const std::vector<Row>& rows, const std::string& command, double seconds) {
  std::string out = "# Tight memory with full-batch statistics\n\n";
  out += "Generated by `" + command + "` (";
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  out += fmt::format("{}, {:.0f} s on this machine). Simulated, on the committed H200 profiles "
                     "(`examples/profiles/<model>-h200.json`). M is the unlimited plan's resident region plus "
                     "its arena peak, every backward plain; each column plans at F x M. \"One round\" is "
                     "`--batchnorm one`, the statistics plain training computes; the default "
                     "(`--batchnorm prefer-one`) may split the batch. Overhead: the plan's simulated time over the unlimited plan's, the faster of "
                     "the plain model's and its memory-saving variants' (docs/planner.md). Targets: "
                     "docs/planner.md, \"The planner's targets\"; a missed one gives the lower bound at its budget "
                     "over the unlimited plan (`planner/lower_bound.h`): \"out of reach\" where it is above the "
                     "target, so that no plan meets it within the cost model.\n\n",
                     date, seconds);
  out += "## One round\n\n| model | batch | M | unlimited |";
  for (size_t i : columns) out += fmt::format(" F = {} |", kAllFractions[i]);
  out += "\n|---|---|---|---|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---|";
  out += "\n";
  for (const Row& r : rows) {
    out += fmt::format("| {} | {} | {} | {:.1f} ms |", r.model, r.batch, format_bytes(r.memory_bytes), r.unlimited_ms);
    for (size_t i = 0; i < r.one_round.size(); ++i)
      out += " " + cell_text(r.one_round[i]) + target_text(r.model, i, r.one_round[i]) + " |";
    out += "\n";
  }
  out += fraction_table(rows, "The default plan (may split the batch)", &Row::default_plan);
  out += fraction_table(rows, "One round, convolutions never recomputed (`--no-recompute-convolutions`)",
                        &Row::cheap_only);
  out += fraction_table(rows, "One round, every backward plain (`--no-memory-saving-variants`)", &Row::plain_only);
  out += fraction_table(rows, "One round, the best plan of the rules unrefined (`--no-refinement`)", &Row::unrefined);
  out += "\n## What the one-round plans do\n\nCompact: the layers planned with their memory-saving backward "
         "(docs/planner.md, \"Memory-saving variants\"). Above the bound: the plan's time over the lower bound at "
         "its budget (`planner/lower_bound.h`; docs/planner.md, \"The lower bound\").\n\n"
         "| model | F | compact | recomputed steps | bytes copied | above the bound | planner |\n"
         "|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows)
    for (size_t i = 0; i < r.one_round.size(); ++i) {
      const Cell& c = r.one_round[i];
      if (!c.feasible) continue;
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f} s |\n", r.model, kAllFractions[columns[i]],
                         c.compact_layers, c.recomputed,
                         format_bytes(c.bytes_copied),
                         c.above_bound < 0 ? std::string("-") : fmt::format("{:+.1f}%", 100 * c.above_bound),
                         c.planner_s);
    }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models;
  std::string markdown_path;
  std::string command = "build/bench/tight_memory_bench";
  bool one_round_only = false;
  for (size_t i = 0; i < kAllFractions.size(); ++i) columns.push_back(i);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--models" && i + 1 < argc) {
      models = bench::split_list(argv[++i]);
      command += " --models " + std::string(argv[i]);
    } else if (arg == "--fractions" && i + 1 < argc) {
      columns.clear();
      for (const std::string& f : bench::split_list(argv[i + 1])) {
        const auto it = std::find_if(kAllFractions.begin(), kAllFractions.end(),
                                     [&](double x) { return fmt::format("{}", x) == f; });
        if (it == kAllFractions.end()) {
          std::fprintf(stderr, "tight_memory_bench: --fractions: %s is not one of 0.65,0.5,0.4,0.33,0.25,0.2\n",
                       f.c_str());
          return 2;
        }
        columns.push_back(static_cast<size_t>(it - kAllFractions.begin()));
      }
      command += " --fractions " + std::string(argv[++i]);
    } else if (arg == "--one-round-only") {
      one_round_only = true;
      command += " --one-round-only";
    } else if (arg == "--markdown" && i + 1 < argc) {
      markdown_path = argv[++i];
      command += " --markdown " + markdown_path;
    } else {
      std::fprintf(stderr, "usage: tight_memory_bench [--models a,b,...] [--fractions f,...] [--one-round-only] "
                           "[--markdown FILE]\n");
      return 2;
    }
  }
  const std::string root = MPLAN_SOURCE_DIR;
  if (models.empty())
    for (const auto& entry : std::filesystem::directory_iterator(root + "/examples/profiles")) {
      const std::string name = entry.path().filename().string();
      const std::string suffix = "-h200.json";
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          name.find('-') == name.size() - suffix.size())
        models.push_back(name.substr(0, name.size() - suffix.size()));
    }
  std::sort(models.begin(), models.end());
  const auto started = std::chrono::steady_clock::now();
  std::vector<Row> rows;
  for (const std::string& m : models) {
    Result<Model> model = load_model(root + "/examples/models/" + m + ".yaml");
    Result<Profile> profile = load_profile(root + "/examples/profiles/" + m + "-h200.json");
    if (!model || !profile) {
      std::fprintf(stderr, "%s: %s\n", m.c_str(),
                   (!model ? model.error() : profile.error()).to_string().c_str());
      return 1;
    }
    const Tdfg tdfg = build_tdfg(*model);
    Result<std::unique_ptr<RecordedCostModel>> cost = RecordedCostModel::create(*profile, tdfg, {}, m);
    if (!cost) {
      std::fprintf(stderr, "%s: %s\n", m.c_str(), cost.error().to_string().c_str());
      return 1;
    }
    Row row;
    row.model = m;
    row.batch = model->batch;
    PlanOptions unlimited;
    unlimited.budget_bytes = (*cost)->device_memory_bytes();
    const PlanResult u = plan_iteration(tdfg, **cost, unlimited);
    if (!u.feasible) {
      std::fprintf(stderr, "%s: the unlimited plan: %s\n", m.c_str(), u.note.c_str());
      return 1;
    }
    // M is the plain model's need (what training keeps without the planner);
    // the reference time is the fastest unlimited plan compile makes, with
    // the memory-saving variants where they are faster even then.
    row.memory_bytes = u.plan.resident_region_bytes + u.plan.summary.peak_arena_bytes;
    const driver::PlannedModel best = driver::plan_model(
        *model, true, unlimited, [&](const Tdfg& candidate) { return plan_iteration(candidate, **cost, unlimited); });
    row.unlimited_ms = std::min(u.plan.summary.simulated_ms, best.planned.plan.summary.simulated_ms);
    std::fprintf(stderr, "%s: M = %s (%lld B), unlimited %.1f ms\n", m.c_str(), format_bytes(row.memory_bytes).c_str(),
                 static_cast<long long>(row.memory_bytes), row.unlimited_ms);
    for (size_t column : columns) {
      const double f = kAllFractions[column];
      const auto budget = static_cast<int64_t>(f * static_cast<double>(row.memory_bytes));
      row.one_round.push_back(
          plan_cell(*model, **cost, budget, PlanOptions::BatchnormRounds::one, row.unlimited_ms));
      std::fprintf(stderr, "  F = %.2f: one round %s (%.1f s)\n", f, cell_text(row.one_round.back()).c_str(),
                   row.one_round.back().planner_s);
      if (one_round_only) continue;
      row.default_plan.push_back(
          plan_cell(*model, **cost, budget, PlanOptions::BatchnormRounds::prefer_one, row.unlimited_ms));
      row.cheap_only.push_back(plan_cell(*model, **cost, budget, PlanOptions::BatchnormRounds::one, row.unlimited_ms,
                                         {.recompute_convolutions = false}));
      row.plain_only.push_back(plan_cell(*model, **cost, budget, PlanOptions::BatchnormRounds::one, row.unlimited_ms,
                                         {.variants = false}));
      row.unrefined.push_back(plan_cell(*model, **cost, budget, PlanOptions::BatchnormRounds::one, row.unlimited_ms,
                                        {.refine = false}));
      std::fprintf(stderr, "  F = %.2f: default %s\n", f, cell_text(row.default_plan.back()).c_str());
    }
    rows.push_back(std::move(row));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string text = markdown(rows, command, seconds);
  if (markdown_path.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream(markdown_path) << text;
    std::fprintf(stderr, "wrote %s\n", markdown_path.c_str());
  }
  return 0;
}
