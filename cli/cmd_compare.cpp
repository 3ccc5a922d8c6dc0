// `mplan compare model.yaml --budget SIZE [--device DEVICE | --profile FILE]
//  [--batch B] [--policies a,b,...] [--min-budget] [--json]`: every scheduling
// policy (planner/policy.h) on the same model, cost model and budget
// (driver/compare.h), in one table:
// feasible, sub-batch, simulated time, overhead against the ideal, bytes
// moved each way, peak bytes, recomputed tasks, planner time, and whether the
// independent verifier accepts the plan (and how many prefetches it found
// freed unread). docs/planner.md, "mplan compare", has the JSON fields. A policy that cannot fit the budget
// says so (and why, with --json) instead of failing the command.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cli/command.h"
#include "core/bytes.h"
#include "driver/compare.h"

namespace mplan::cli {
namespace {

std::string ms_text(double ms) { return fmt::format("{:.1f}", ms); }

// Planned: feasible, or the ideal (whose plan is always made).
bool planned(const PlanResult& r) { return r.feasible || r.policy == PolicyKind::ideal; }

nlohmann::json json_row(const driver::CompareRow& row, double ideal_ms) {
  const PlanResult& o = row.planned;
  const PlanSummary& s = o.plan.summary;
  nlohmann::json j;
  j["policy"] = policy_name(o.policy);
  j["feasible"] = o.feasible;
  j["note"] = o.note;
  if (planned(o)) {
    j["sub_batch"] = o.plan.sub_batch;
    j["rounds"] = o.plan.sub_batches.size();
    j["simulated_ms"] = o.iteration_ms();
    j["overhead"] = ideal_ms > 0 ? o.iteration_ms() / ideal_ms - 1 : 0.0;
    j["bytes_to_host"] = s.bytes_to_host;
    j["bytes_to_device"] = s.bytes_to_device;
    j["peak_bytes"] = row.peak_bytes;
    j["recomputed_tasks"] = o.recomputed_tasks;
    j["stall_ms"] = s.stall_ms;
    j["violations"] = row.violations;
    j["prefetches_freed_unread"] = row.prefetches_freed_unread;
    if (!row.first_violation.empty()) j["first_violation"] = row.first_violation;
  }
  j["planner_ms"] = o.planner_ms;
  j["simulations"] = o.simulations;
  if (row.min_budget_bytes != -2) j["min_budget_bytes"] = row.min_budget_bytes;
  if (row.joint_ms >= 0) j["joint_step_ms"] = row.joint_ms;
  if (row.staggered_ms >= 0) {
    j["staggered_step_ms"] = row.staggered_ms;
    j["staggered_policy"] = row.staggered_policy;
  }
  return j;
}

void print_json(const driver::CompareResult& r) {
  nlohmann::json out;
  out["model"] = r.model_name;
  out["precision"] = precision_name(r.precision);
  out["device"] = r.cost_model;
  out["budget_bytes"] = r.budget_bytes;
  out["batch"] = r.batch;
  out["tasks"] = r.tasks;
  out["blocks"] = r.blocks;
  out["ideal_ms"] = r.ideal.iteration_ms();
  out["ideal_budget_bytes"] = r.ideal.plan.budget_bytes;
  if (r.ranks > 1) out["ranks"] = r.ranks;
  nlohmann::json list = nlohmann::json::array();
  for (const driver::CompareRow& row : r.rows) list.push_back(json_row(row, r.ideal.iteration_ms()));
  out["policies"] = list;
  fmt::print("{}\n", out.dump(2));
}

void print_table(const driver::CompareResult& r, bool min_budget) {
  const double ideal_ms = r.ideal.iteration_ms();
  fmt::print("model {} (batch {}{}) on {}, budget {}\n", r.model_name, r.batch,
             is_16_bit(r.precision) ? fmt::format(", precision {}", precision_name(r.precision)) : "", r.cost_model,
             format_bytes(r.budget_bytes));
  fmt::print("ideal: {} ms, needs {}\n", ms_text(ideal_ms), format_bytes(r.ideal.plan.budget_bytes));
  if (r.ranks > 1)
    fmt::print("{}\nbatch above is each rank's share; \"joint ms\": every rank's step priced together on the shared "
               "links, the plan alike on every rank and then staggered (vDNN: the paper's Step 3, mplan: its "
               "search; docs/multi-gpu.md)\n",
               r.ranks_line);
  fmt::print("\n");
  std::string header = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>9} {:>11} {:>11} {:>11} {:>6} {:>10} {:<8}",
                                   "policy", "feasible", "sub-batch", "time ms", "overhead", "to host",
                                   "to device", "peak", "recomp", "planner ms", "verified");
  if (min_budget) header += fmt::format(" {:>11}", "min budget");
  if (r.ranks > 1) header += fmt::format(" {:>11} {:>13}", "joint ms", "staggered ms");
  fmt::print("{}\n", header);
  for (const driver::CompareRow& row : r.rows) {
    const PlanResult& o = row.planned;
    const PlanSummary& s = o.plan.summary;
    std::string line;
    if (planned(o)) {
      std::string verified = row.violations < 0 ? "-" : row.violations == 0 ? "ok" : fmt::format("{} err", row.violations);
      if (row.prefetches_freed_unread > 0) verified += fmt::format(", {} unread", row.prefetches_freed_unread);
      line = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>8.1f}% {:>11} {:>11} {:>11} {:>6} {:>10.1f} {:<8}",
                         policy_name(o.policy), o.feasible ? "yes" : "no", o.plan.sub_batch,
                         ms_text(o.iteration_ms()), 100.0 * (o.iteration_ms() / ideal_ms - 1),
                         format_bytes(s.bytes_to_host), format_bytes(s.bytes_to_device), format_bytes(row.peak_bytes),
                         o.recomputed_tasks, o.planner_ms, verified);
    } else {
      line = fmt::format("{:<13} {:<8} {:>9} {:>11} {:>9} {:>11} {:>11} {:>11} {:>6} {:>10.1f} {:<8}",
                         policy_name(o.policy), "no", "-", "-", "-", "-", "-", "-", "-", o.planner_ms, "-");
    }
    if (min_budget)
      line += fmt::format(" {:>11}", row.min_budget_bytes < 0 ? std::string("none") : format_bytes(row.min_budget_bytes));
    if (r.ranks > 1)
      line += fmt::format(" {:>11} {:>13}", row.joint_ms < 0 ? std::string("-") : ms_text(row.joint_ms),
                          row.staggered_ms < 0 ? std::string("-") : ms_text(row.staggered_ms));
    fmt::print("{}\n", line);
  }
  fmt::print("\n");
  for (const driver::CompareRow& row : r.rows) {
    if (!row.planned.note.empty()) fmt::print("{}: {}\n", policy_name(row.planned.policy), row.planned.note);
    if (!row.first_violation.empty())
      fmt::print("{}: verifier: {}\n", policy_name(row.planned.policy), row.first_violation);
  }
}

void run_compare(const driver::CompareFlags& flags, bool json) {
  driver::CompareSettings settings = unwrap(driver::check_compare_flags(flags));
  // Progress on a terminal only: pipes and files get the result alone.
  if (::isatty(STDERR_FILENO)) {
    const size_t count = settings.policies.size();
    settings.on_policy = [count](PolicyKind kind, size_t index) {
      fmt::print(stderr, "mplan: compare: planning {} ({} of {})\n", policy_name(kind), index + 1, count);
    };
  }
  const driver::CompareResult result = unwrap(driver::compare(settings));
  for (const std::string& warning : result.warnings) fmt::print(stderr, "mplan: warning: {}\n", warning);
  if (json) print_json(result);
  else print_table(result, settings.min_budget);
}

void setup_compare(CLI::App& command) {
  auto options = std::make_shared<driver::CompareFlags>();
  auto json = std::make_shared<bool>(false);
  command.add_option("model", options->model_path, "Model file (YAML)")->required();
  command.add_option("--budget", options->budget, "Device memory budget, e.g. 12GiB, 8GB, 4096MiB")->required();
  command.add_option("--device", options->device,
                     "Device: a name from examples/devices (k40, h100, ...) or a path to a device file (default: k40, "
                     "the papers' GPU)");
  command.add_option("--profile", options->profile,
                     "Compare with a recorded cost model (profile.json from `mplan profile`) instead of --device");
  auto* batch = command.add_option("--batch", options->batch, "Mini-batch B (default: the model's batch)");
  command.add_option("--precision", options->precision,
                     "Precision of the tensors, replacing the model's precision and math: fp32, tf32, bf16 or "
                     "fp16 (docs/model-format.md)");
  command.add_option("--policies", options->policies,
                     "Comma-separated policies (default: all): ideal, vdnn-all-m, vdnn-all-p, vdnn-conv-m, "
                     "vdnn-conv-p, vdnn-dyn, vdnn+, superneurons, checkpoint, dtr, checkmate, modnn, mplan");
  command.add_flag("--min-budget", options->min_budget,
                   "Also find each policy's minimum feasible budget (a grid from moDNN's Eq. 2 minimum to twice "
                   "the ideal's need, then bisection to 0.1% of the ideal's need; slower)");
  command.add_flag("--no-verify", options->no_verify, "Do not run the plan verifier on each plan");
  command.add_option("--gpus", options->gpus,
                     "Compare on N GPUs: each policy plans a rank's share of the batch, priced with every rank on "
                     "the shared links (docs/multi-gpu.md)");
  command.add_option("--machine", options->machine,
                     "The machine of --gpus: a machine file or a name in examples/machines");
  command.add_flag("--json", *json, "Print JSON instead of the table");
  command.add_flag("--allow-oversubscribe", options->allow_oversubscribe,
                   "Accept a --budget above the device's memory");
  command.callback([options, json, batch] {
    options->batch_given = batch->count() > 0;
    run_compare(*options, *json);
  });
}

const Registration registration("compare", "Compare scheduling policies (ideal, vDNN, SuperNeurons, checkpointing, DTR, Checkmate, moDNN, mplan) "
                                           "on one model, device and budget",
                                setup_compare, 60);

}  // namespace
}  // namespace mplan::cli
