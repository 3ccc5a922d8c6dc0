// `mplan compare model.yaml --budget SIZE [--device DEVICE] [--batch B]
//  [--policies a,b,...] [--min-budget] [--json]`: every scheduling policy
// (planner/policy.h) on the same model, device and budget, in one table:
// feasible, sub-batch, simulated time, overhead against the ideal, bytes
// moved each way, peak bytes, recomputed tasks, planner time, and whether the
// independent verifier accepts the plan. A policy that cannot fit the budget
// says so (and why, with --json) instead of failing the command.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/bytes.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "planner/policy.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {
namespace {

struct CompareOptions {
  std::string model_path;
  std::string budget;
  std::string device = "k40";
  int64_t batch = 0;
  std::string policies;  // comma-separated; empty: all
  bool min_budget = false;
  bool json = false;
  bool no_verify = false;
  bool batch_given = false;
  bool allow_oversubscribe = false;
};

struct Row {
  PolicyOutcome outcome;
  int64_t peak_bytes = 0;          // resident region + arena peak
  int violations = -1;             // -1: not verified
  std::string first_violation;
  int64_t min_budget_bytes = -2;   // -2: not asked; -1: infeasible even at the ideal's need
};

std::vector<PolicyKind> parse_policy_list(const std::string& text) {
  if (text.empty()) return all_policies();
  std::vector<PolicyKind> out;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    PolicyKind kind;
    if (!parse_policy(name, &kind)) {
      std::string known;
      for (PolicyKind k : all_policies()) known += std::string(known.empty() ? "" : ", ") + policy_name(k);
      fail_usage("--policies: unknown policy '" + name + "'; expected some of: " + known);
    }
    out.push_back(kind);
  }
  return out;
}

std::string ms_text(double ms) { return fmt::format("{:.1f}", ms); }

void run_compare(const CompareOptions& options) {
  Result<int64_t> budget = parse_bytes(options.budget);
  if (!budget) fail_usage("--budget: " + budget.error().message);
  if (*budget <= 0) fail_usage("--budget: must be positive, not " + options.budget);
  if (options.batch_given && options.batch <= 0) fail_usage("--batch: must be a positive number of samples");
  const std::vector<PolicyKind> kinds = parse_policy_list(options.policies);
  const Model model = unwrap(load_model(options.model_path));
  Result<Device> device = load_device(options.device);
  if (!device) {
    fail("--device: " + device.error().to_string(), device.error().kind);
  }
  const int64_t batch = options.batch_given ? options.batch : model.batch;
  if (Status s = check_batch(model, batch, "--batch"); !s) fail_usage(s.error().message);
  if (*budget > device->memory_bytes && !options.allow_oversubscribe)
    fail_usage(fmt::format("--budget {} is more than the device's memory ({}, {}); pass --allow-oversubscribe to "
                           "compare at it anyway",
                           format_bytes(*budget), format_bytes(device->memory_bytes), device->name));
  const Tdfg tdfg = build_tdfg(model);
  const Result<MathMode> math = resolve_math_mode(*device, model.math);
  if (!math) fail(options.model_path + ": " + math.error().message);
  const AnalyticCostModel cost(*device, *math);

  PolicyOptions po;
  po.budget_bytes = *budget;
  po.batch = batch;
  const PolicyOutcome ideal = run_policy(PolicyKind::ideal, tdfg, cost, po);
  const int64_t ideal_budget = ideal.plan.budget_bytes;
  bool has_batchnorm = false;
  for (const Layer& l : model.layers) has_batchnorm = has_batchnorm || op_spec(l.op).batch_statistics;
  std::vector<Row> rows;
  for (PolicyKind kind : kinds) {
    Row row;
    if (kind == PolicyKind::mplan && has_batchnorm) {
      // The baselines split batchnorm models by time alone; so does mplan's row,
      // and its note gives compile's default (one round where that costs little more).
      PolicyOptions any = po;
      any.scheduler.batchnorm_rounds = PlanOptions::BatchnormRounds::any;
      row.outcome = run_policy(kind, tdfg, cost, any);
      const PolicyOutcome preferred = run_policy(kind, tdfg, cost, po);
      if (row.outcome.feasible && preferred.feasible &&
          preferred.plan.sub_batches.size() != row.outcome.plan.sub_batches.size())
        row.outcome.note += fmt::format("; batchnorm split by time, as the baselines do (compile's default "
                                        "--batchnorm prefer-one: {:.1f} ms in {} round{})",
                                        preferred.simulated_ms, preferred.plan.sub_batches.size(),
                                        preferred.plan.sub_batches.size() == 1 ? "" : "s");
    } else {
      row.outcome = kind == PolicyKind::ideal ? ideal : run_policy(kind, tdfg, cost, po);
    }
    const Plan& plan = row.outcome.plan;
    if (row.outcome.feasible || kind == PolicyKind::ideal) {
      row.peak_bytes = plan.resident_region_bytes + plan.summary.peak_arena_bytes;
      if (!options.no_verify) {
        std::vector<Violation> v = verify_plan(plan, tdfg);
        row.violations = static_cast<int>(v.size());
        if (!v.empty()) row.first_violation = to_string(v.front());
      }
    }
    if (options.min_budget) {
      // To 0.1% of the ideal's need (at least 4 KiB): planner/policy.h says how.
      const int64_t resolution = std::max<int64_t>(4096, ideal_budget / 1024);
      row.min_budget_bytes = minimum_feasible_budget(kind, tdfg, cost, batch, resolution);
    }
    rows.push_back(std::move(row));
  }

  if (options.json) {
    nlohmann::json out;
    out["model"] = model.name;
    out["device"] = cost.describe();
    out["budget_bytes"] = *budget;
    out["batch"] = batch;
    out["tasks"] = tdfg.tasks.size();
    out["blocks"] = tdfg.blocks.size();
    out["ideal_ms"] = ideal.simulated_ms;
    out["ideal_budget_bytes"] = ideal_budget;
    nlohmann::json list = nlohmann::json::array();
    for (const Row& row : rows) {
      const PolicyOutcome& o = row.outcome;
      const PlanSummary& s = o.plan.summary;
      nlohmann::json j;
      j["policy"] = policy_name(o.kind);
      j["feasible"] = o.feasible;
      j["note"] = o.note;
      if (o.feasible || o.kind == PolicyKind::ideal) {
        j["sub_batch"] = o.plan.sub_batch;
        j["rounds"] = o.plan.sub_batches.size();
        j["simulated_ms"] = o.simulated_ms;
        j["overhead"] = ideal.simulated_ms > 0 ? o.simulated_ms / ideal.simulated_ms - 1 : 0.0;
        j["bytes_to_host"] = s.bytes_to_host;
        j["bytes_to_device"] = s.bytes_to_device;
        j["peak_bytes"] = row.peak_bytes;
        j["recomputed_tasks"] = o.recomputed_tasks;
        j["stall_ms"] = s.stall_ms;
        j["violations"] = row.violations;
        if (!row.first_violation.empty()) j["first_violation"] = row.first_violation;
      }
      j["planner_ms"] = o.planner_ms;
      j["simulations"] = o.simulations;
      if (row.min_budget_bytes != -2) j["min_budget_bytes"] = row.min_budget_bytes;
      list.push_back(j);
    }
    out["policies"] = list;
    fmt::print("{}\n", out.dump(2));
    return;
  }

  fmt::print("model {} (batch {}) on {}, budget {}\n", model.name, batch, cost.describe(),
             format_bytes(*budget));
  fmt::print("ideal: {} ms, needs {}\n\n", ms_text(ideal.simulated_ms), format_bytes(ideal_budget));
  std::string header = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>9} {:>11} {:>11} {:>11} {:>6} {:>10} {:<8}",
                                   "policy", "feasible", "sub-batch", "time ms", "overhead", "to host",
                                   "to device", "peak", "recomp", "planner ms", "verified");
  if (options.min_budget) header += fmt::format(" {:>11}", "min budget");
  fmt::print("{}\n", header);
  for (const Row& row : rows) {
    const PolicyOutcome& o = row.outcome;
    const PlanSummary& s = o.plan.summary;
    std::string line;
    bool planned = o.feasible || o.kind == PolicyKind::ideal;
    if (planned) {
      std::string verified = row.violations < 0 ? "-" : row.violations == 0 ? "ok" : fmt::format("{} err", row.violations);
      line = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>8.1f}% {:>11} {:>11} {:>11} {:>6} {:>10.1f} {:<8}",
                         policy_name(o.kind), o.feasible ? "yes" : "no", o.plan.sub_batch, ms_text(o.simulated_ms),
                         100.0 * (o.simulated_ms / ideal.simulated_ms - 1), format_bytes(s.bytes_to_host),
                         format_bytes(s.bytes_to_device), format_bytes(row.peak_bytes), o.recomputed_tasks,
                         o.planner_ms, verified);
    } else {
      line = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>9} {:>11} {:>11} {:>11} {:>6} {:>10.1f} {:<8}",
                         policy_name(o.kind), "no", "-", "-", "-", "-", "-", "-", "-", o.planner_ms, "-");
    }
    if (options.min_budget) {
      line += fmt::format(" {:>11}", row.min_budget_bytes < 0 ? std::string("none") : format_bytes(row.min_budget_bytes));
    }
    fmt::print("{}\n", line);
  }
  fmt::print("\n");
  for (const Row& row : rows) {
    if (!row.outcome.note.empty()) fmt::print("{}: {}\n", policy_name(row.outcome.kind), row.outcome.note);
    if (!row.first_violation.empty()) fmt::print("{}: verifier: {}\n", policy_name(row.outcome.kind), row.first_violation);
  }
}

void setup_compare(CLI::App& command) {
  auto options = std::make_shared<CompareOptions>();
  command.add_option("model", options->model_path, "Model file (YAML)")->required();
  command.add_option("--budget", options->budget, "Device memory budget, e.g. 12GiB, 8GB, 4096MiB")->required();
  command.add_option("--device", options->device,
                     "Device: a name from examples/devices (k40, h100, ...) or a path to a device file")
      ->capture_default_str();
  auto* batch = command.add_option("--batch", options->batch, "Mini-batch B (default: the model's batch)");
  command.add_option("--policies", options->policies,
                     "Comma-separated policies (default: all): ideal, vdnn-all-m, vdnn-all-p, vdnn-conv-m, "
                     "vdnn-conv-p, vdnn-dyn, vdnn+, superneurons, modnn, mplan");
  command.add_flag("--min-budget", options->min_budget,
                   "Also find each policy's minimum feasible budget (a grid from moDNN's Eq. 2 minimum to twice "
                   "the ideal's need, then bisection to 0.1% of the ideal's need; slower)");
  command.add_flag("--no-verify", options->no_verify, "Do not run the plan verifier on each plan");
  command.add_flag("--json", options->json, "Print JSON instead of the table");
  command.add_flag("--allow-oversubscribe", options->allow_oversubscribe,
                   "Accept a --budget above the device's memory");
  command.callback([options, batch] {
    options->batch_given = batch->count() > 0;
    run_compare(*options);
  });
}

const Registration registration("compare", "Compare scheduling policies (ideal, vDNN, SuperNeurons, moDNN, mplan) "
                                           "on one model, device and budget",
                                setup_compare, 60);

}  // namespace
}  // namespace mplan::cli
