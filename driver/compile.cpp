#include "driver/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/bytes.h"
#include "driver/evaluation_plan.h"
#include "driver/model_input.h"
#include "driver/paths.h"
#include "driver/planned_model.h"
#include "frontend/validate.h"
#include "planner/memory_svg.h"
#include "planner/plan_json.h"
#include "planner/trace.h"
#include "planner/verify.h"
#include "tdfg/bounds.h"
#include "profiler/install_paths.h"
#include "tdfg/tdfg.h"

namespace mplan::driver {
namespace {

#ifndef MPLAN_VERSION_TEXT
#define MPLAN_VERSION_TEXT "0.1.0"
#endif

Error usage(std::string message) { return Error{{}, std::move(message), ErrorKind::usage}; }

// Whether this machine has an NVIDIA GPU (its driver lists one), for the
// default target: a GPU program where one can run, the CPU program elsewhere.
bool gpu_present() {
  std::error_code ec;
  const std::filesystem::path gpus = "/proc/driver/nvidia/gpus";
  return std::filesystem::is_directory(gpus, ec) && !std::filesystem::is_empty(gpus, ec);
}

std::string policy_names() {
  std::string out;
  for (PolicyKind kind : all_policies()) out += (out.empty() ? "" : ", ") + std::string(policy_name(kind));
  return out;
}

// The layer-wise policies follow their papers' rules and have none of the
// scheduler's knobs: refused rather than ignored.
std::optional<Error> check_policy_flags(const CompileFlags& f, PolicyKind policy) {
  if (policy != PolicyKind::mplan && policy != PolicyKind::modnn) {
    const char* flag = f.sub_batch_given        ? "--sub-batch"
                       : f.copy_engines_given   ? "--copy-engines"
                       : f.no_prefetch          ? "--no-prefetch"
                       : f.lean_algorithms      ? "--lean-algorithms"
                       : f.workspace_given      ? "--workspace"
                       : !f.dump_lp.empty()     ? "--dump-lp"
                       : f.no_recompute         ? "--no-recompute"
                       : f.no_recompute_convolutions ? "--no-recompute-convolutions"
                       : f.no_memory_saving_variants ? "--no-memory-saving-variants"
                       : f.no_early_offload     ? "--no-early-offload"
                       : f.no_early_drops       ? "--no-early-drops"
                       : f.no_refinement        ? "--no-refinement"
                       : f.no_load_ahead        ? "--no-load-ahead"
                       : f.no_compaction        ? "--no-compaction"
                       : f.batchnorm_given      ? "--batchnorm"
                                                : nullptr;
    if (flag != nullptr)
      return usage(fmt::format("{} is an option of the planner (--policy mplan or modnn), not of --policy {}", flag,
                               f.policy));
  }
  if (policy == PolicyKind::modnn) {
    // moDNN as published has neither lever.
    const char* flag = f.no_recompute                ? "--no-recompute"
                       : f.no_recompute_convolutions ? "--no-recompute-convolutions"
                       : f.no_memory_saving_variants ? "--no-memory-saving-variants"
                       : f.no_early_offload          ? "--no-early-offload"
                       : f.no_early_drops            ? "--no-early-drops"
                       : f.no_refinement             ? "--no-refinement"
                       : f.no_load_ahead             ? "--no-load-ahead"
                       : f.no_compaction             ? "--no-compaction"
                                                     : nullptr;
    if (flag != nullptr)
      return usage(fmt::format("{} is a lever of mplan's planner; --policy modnn has none to turn off", flag));
  }
  return std::nullopt;
}

// The planner's options from the flags (their ranges checked).
Result<PlanOptions> plan_options(const CompileFlags& f) {
  PlanOptions o;
  Result<int64_t> budget = parse_bytes(f.budget);
  if (!budget) return usage(fmt::format("--budget '{}': {}", f.budget, budget.error().message));
  if (*budget <= 0) return usage(fmt::format("--budget '{}': the budget must be more than 0 bytes", f.budget));
  o.budget_bytes = *budget;
  Result<WorkspaceMode> workspace = parse_workspace_mode(f.workspace);
  if (!workspace) return usage(workspace.error().message);
  o.workspace = workspace->use;
  o.workspace_bytes = workspace->bytes;
  if (!f.dump_lp.empty() && o.workspace != WorkspaceUse::wd && o.workspace != WorkspaceUse::wd_auto)
    return usage(fmt::format("--dump-lp needs a WD workspace mode (--workspace wd:TOTAL or wd:auto), not '{}'",
                             f.workspace));
  if (f.batch_given && f.batch <= 0)
    return usage(fmt::format("--batch must be a positive number of samples, got {}", f.batch));
  if (f.sub_batch_given && f.sub_batch <= 0)
    return usage(fmt::format("--sub-batch must be a positive number of samples, got {}", f.sub_batch));
  if (f.copy_engines_given && f.copy_engines != 1 && f.copy_engines != 2)
    return usage(fmt::format("--copy-engines must be 1 (one copy stream shared by both directions) or 2 (one per "
                             "direction), got {}",
                             f.copy_engines));
  using Rounds = PlanOptions::BatchnormRounds;
  if (f.batchnorm == "prefer-one") o.batchnorm_rounds = Rounds::prefer_one;
  else if (f.batchnorm == "one") o.batchnorm_rounds = Rounds::one;
  else if (f.batchnorm == "any") o.batchnorm_rounds = Rounds::any;
  else return usage(fmt::format("--batchnorm '{}': expected prefer-one, one or any", f.batchnorm));
  if (!parse_policy(f.policy, &o.policy))
    return usage(fmt::format("--policy '{}': unknown policy; expected one of {}", f.policy, policy_names()));
  if (std::optional<Error> e = check_policy_flags(f, o.policy)) return *e;
  o.batch = f.batch_given ? f.batch : 0;
  o.sub_batch = f.sub_batch_given ? f.sub_batch : 0;
  o.copy_engines = f.copy_engines_given ? f.copy_engines : 0;
  o.prefetch = !f.no_prefetch;
  o.select_algorithms = !f.lean_algorithms;
  o.recompute = !f.no_recompute;
  o.recompute_convolutions = !f.no_recompute_convolutions;
  o.early_offload = !f.no_early_offload;
  o.early_drops = !f.no_early_drops;
  o.refine_blocks = !f.no_refinement;
  o.load_ahead = !f.no_load_ahead;
  o.compaction = !f.no_compaction;
  return o;
}

}  // namespace

Result<CompileSettings> check_compile_flags(const CompileFlags& f) {
  CompileSettings s;
  Result<PlanOptions> plan = plan_options(f);
  if (!plan) return plan.error();
  s.plan = std::move(plan).value();
  if (!f.device.empty() && !f.profile.empty())
    return usage("--device and --profile exclude each other: a profile names its own device");
  s.cost = CostSource{f.device, f.profile, false};
  Result<std::optional<Precision>> precision = precision_flag(f.precision);
  if (!precision) return precision.error();
  s.precision = *precision;
  if (!f.target.empty()) {
    if (!codegen::parse_target(f.target, &s.target))
      return usage(fmt::format("--target '{}': expected cpu or cuda", f.target));
    s.target_line = fmt::format("target: {}", f.target);
  } else {
    s.target = gpu_present() ? codegen::Target::cuda : codegen::Target::cpu;
    s.target_line = s.target == codegen::Target::cuda
                        ? "target: cuda (this machine has an NVIDIA GPU; --target cpu for the CPU program)"
                        : "target: cpu (no GPU on this machine; --target cuda writes the CUDA program)";
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (f.out_dir.empty()) return usage("-o: expected an output folder");
  if (fs::exists(f.out_dir, ec) && !fs::is_directory(f.out_dir, ec))
    return usage(fmt::format("-o '{}': exists and is not a folder", f.out_dir));
  // The output folder is replaced as a whole: no input may live in it, and
  // --dump-lp must not name an input.
  const std::vector<std::string> inputs = {f.model_path, f.profile,
                                           f.device.find('/') != std::string::npos ? f.device : std::string()};
  if (Status refused = refuse_overwriting_inputs("-o", f.out_dir, inputs, /*output_is_folder=*/true); !refused)
    return refused.error();
  if (!f.dump_lp.empty())
    if (Status refused = refuse_overwriting_inputs("--dump-lp", f.dump_lp, inputs); !refused) return refused.error();
  s.model_path = f.model_path;
  s.out_dir = f.out_dir;
  s.allow_oversubscribe = f.allow_oversubscribe;
  s.dump_lp = f.dump_lp;
  s.build = f.build;
  s.plan_only = f.plan_only;
  if (f.plan_only && f.build) return usage("--plan-only and --build exclude each other: --build builds the program");
  if (f.plan_only && !f.target.empty())
    return usage("--plan-only and --target exclude each other: no program is written");
  s.memory_saving_variants = !f.no_memory_saving_variants;
  Result<DataParallelSettings> ranks = check_data_parallel_flags(f.data_parallel, s.plan.policy);
  if (!ranks) return ranks.error();
  s.data_parallel = *ranks;
  if (s.data_parallel.given() && s.plan.policy == PolicyKind::ideal)
    return usage("--gpus: the ideal is one GPU's reference with unlimited memory; plan several GPUs with mplan or a "
                 "paper's policy");
  return s;
}

namespace {

// Why no plan: the planner's own message for its searches, which name the
// flag and the minimum (moDNN Eq. 2); the policy's name for the others.
Error infeasible(const CompileSettings& s, const PlanResult& planned, const std::string& budget_text) {
  const PolicyKind policy = s.plan.policy;
  if (policy == PolicyKind::mplan || policy == PolicyKind::modnn)
    return Error{{}, planned.note, ErrorKind::infeasible};
  if (policy == PolicyKind::ideal)
    return Error{{}, fmt::format("--policy ideal: the ideal plan (unlimited memory) {} of {}; it is for comparison "
                                 "(`mplan compare`) and compiles only where it fits",
                                 planned.note, budget_text),
                 ErrorKind::infeasible};
  return Error{{}, fmt::format("--policy {}: no plan within --budget {}: {}", policy_name(policy), budget_text,
                               planned.note),
               ErrorKind::infeasible};
}

// A plan the verifier rejects is a planner bug, never the user's: nothing is written.
Status verified(const Plan& plan, const Tdfg& tdfg) {
  const std::vector<Violation> violations = verify_plan(plan, tdfg);
  if (violations.empty()) return Ok{};
  std::string list;
  const size_t shown = std::min<size_t>(violations.size(), 50);
  for (size_t i = 0; i < shown; ++i) list += "\n  " + to_string(violations[i]);
  if (shown < violations.size()) list += fmt::format("\n  ... and {} more", violations.size() - shown);
  return Error{{}, fmt::format("internal error: the planner made a plan that fails verification ({} violation{}); "
                               "nothing was written. Please report this with the model and flags.{}",
                               violations.size(), violations.size() == 1 ? "" : "s", list),
               ErrorKind::internal};
}

}  // namespace

Result<CompileResult> compile(const CompileSettings& s) {
  CompileResult out;
  // Several GPUs: the machine first (its GPUs' device prices the plan unless
  // --device or --profile says otherwise), then each rank's share of the batch.
  Result<RankMachine> machine = load_rank_machine(s.data_parallel);
  if (!machine) return machine.error();
  const int32_t ranks = machine->ranks;
  CostSource cost_source = s.cost;
  if (!machine->standalone && cost_source.device.empty() && cost_source.profile.empty()) {
    const Device& gpu = machine->machine.gpus[0].device;
    cost_source.device = gpu.source_file.empty() ? gpu.name : gpu.source_file;
  }
  PlanOptions options = s.plan;
  // The model's text is kept: compile writes a copy beside the plan; an
  // .onnx model's copy is the YAML it was imported as.
  Result<ModelInput> input = load_model_input(s.model_path, s.plan.batch, s.precision);
  if (!input) return input.error();
  if (ranks > 1) {
    const int64_t global_batch = s.plan.batch > 0 ? s.plan.batch : input->model.batch;
    Result<int64_t> share = rank_batch(global_batch, ranks, s.plan.batch > 0);
    if (!share) return share.error();
    options.batch = *share;
    input = load_model_input(s.model_path, options.batch, s.precision);
    if (!input) return input.error();
  }
  const Model& model = input->model;
  out.model_notes = input->notes;
  const int64_t batch = options.batch > 0 ? options.batch : model.batch;
  if (options.batch > 0)
    if (Status checked = check_batch(model, options.batch, ranks > 1 ? "--batch (a rank's share)" : "--batch");
        !checked)
      return Error{{}, checked.error().message, ErrorKind::usage};
  if (options.sub_batch > batch)
    return Error{{}, fmt::format("--sub-batch {} is larger than the batch {}{}", options.sub_batch, batch,
                                 ranks > 1 ? " of each rank" : ""),
                 ErrorKind::usage};
  const Tdfg plain_tdfg = build_tdfg(model);
  Result<LoadedCostModel> cost = make_cost_model(cost_source, model, s.model_path, plain_tdfg, batch);
  if (!cost) return cost.error();
  out.device_line = cost->device_line;
  out.warnings = cost->warnings;
  const CostModel& costs = *cost->model;
  const std::string budget_text = format_bytes(s.plan.budget_bytes);
  // A budget the device does not have: the program would fail when it
  // allocates its arena. Refused unless the user says so.
  if (s.plan.budget_bytes > costs.device_memory_bytes()) {
    if (!s.allow_oversubscribe)
      return Error{{}, fmt::format("--budget {} is more than the device's memory ({}, {}): the program could not "
                                   "allocate it. Give a budget up to the device's memory, or pass "
                                   "--allow-oversubscribe if the device really has more",
                                   budget_text, format_bytes(costs.device_memory_bytes()), costs.describe()),
                   ErrorKind::usage};
    out.warnings.push_back(fmt::format("--budget {} is more than the device's memory ({}); allowed by "
                                       "--allow-oversubscribe",
                                       budget_text, format_bytes(costs.device_memory_bytes())));
  }
  // mplan's own search also plans the model with its memory-saving variants;
  // the layer-wise policies and moDNN plan the model as their papers do.
  const bool variants = s.memory_saving_variants && s.plan.policy == PolicyKind::mplan;
  const PlanOf plan_one = [&](const Tdfg& candidate) { return plan_iteration(candidate, costs, options); };
  PlannedModel chosen = plan_model(model, variants, options, plan_one, !costs.measures_when_asked());
  out.planned = std::move(chosen.planned);
  out.variants_line = variants_text(chosen);
  out.copies_line = weight_copies_text(chosen);
  const Tdfg& tdfg = chosen.tdfg;
  if (!out.planned.feasible) return infeasible(s, out.planned, budget_text);
  const auto finish = [&](Plan& plan) {
    plan.compact_backward_layers = chosen.compact_layers;
    plan.weight_copies_where_used = chosen.copies_where_used;
    const CostModelInfo info = costs.info();
    plan.cost_model_kind = info.kind;
    plan.math_mode = info.math_mode;
    plan.cost_model_error = info.expected_error;
    if (plan.task_names.empty())
      for (const Task& t : tdfg.tasks) plan.task_names.push_back(t.name);
    if (plan.block_names.empty())
      for (const Block& b : tdfg.blocks) plan.block_names.push_back(b.name);
    if (is_16_bit(model.precision) && plan.block_types.empty())
      for (const Block& b : tdfg.blocks) plan.block_types.push_back(data_type_name(b.dtype));
  };
  std::string trace;
  if (ranks > 1) {
    // Every rank's plan, priced together on the machine's shared links.
    complete_standalone(*machine, costs, cost->device_name);
    RankPlanFiles rank_plans = plan_ranks(tdfg, costs, *machine, options, s.data_parallel, std::move(out.planned),
                                          finish);
    out.ranks_text = rank_plans.text;
    trace = std::move(rank_plans.trace_json);
    out.planned = std::move(rank_plans.plans[0]);
    for (size_t i = 1; i < rank_plans.plans.size(); ++i) {
      if (Status ok = verified(rank_plans.plans[i].plan, tdfg); !ok) return ok.error();
      out.other_rank_plans.push_back(std::move(rank_plans.plans[i]));
    }
  } else {
    finish(out.planned.plan);
  }
  Plan& plan = out.planned.plan;
  if (Status ok = verified(plan, tdfg); !ok) return ok.error();
  // Every workspace mode splits kernels only into the micro-batches the bound counts (powerOfTwo).
  out.lower_bound = lower_bound_over_models(model, costs, plan.resident_region_bytes + plan.arena_bytes, batch);

  out.files = {{"plan.json", plan_to_json(plan)},
               {"trace.json", ranks > 1 ? trace : plan_to_trace_json(plan)},
               {"memory.svg", plan_memory_svg(plan)},
               {kModelCopyFile, input->yaml}};
  for (const PlanResult& other : out.other_rank_plans)
    out.files.push_back({rank_plan_file(other.plan.data_parallel.rank), plan_to_json(other.plan)});
  if (s.plan_only) return out;
  // The evaluation pass, planned in the same budget on the same resident region.
  Result<EvaluationPlan> evaluation = plan_evaluation(*chosen.model, costs, plan);
  if (!evaluation) return evaluation.error();
  out.evaluation_line = evaluation_text(evaluation->planned.plan);
  out.files.push_back({"evaluation-plan.json", plan_to_json(evaluation->planned.plan)});
  // The training program: train.cpp and CMakeLists.txt (codegen/codegen.h),
  // against the runtime this mplan ships (installed, $MPLAN_HOME, or its source tree).
  codegen::CodegenOptions codegen_options;
  codegen_options.mplan_version = MPLAN_VERSION_TEXT;
  codegen_options.model_file = s.model_path;
  codegen_options.target = s.target;
  codegen_options.runtime_dir = install_paths().runtime_dir;
  const codegen::EvaluationSchedule schedule{&evaluation->tdfg, &evaluation->planned.plan};
  std::vector<const Plan*> rank_plans;  // ranks whose plans differ from rank 0's: schedules of their own
  for (const PlanResult& other : out.other_rank_plans) rank_plans.push_back(&other.plan);
  Result<codegen::GeneratedProgram> program =
      codegen::emit_program(*chosen.model, tdfg, plan, codegen_options, &schedule, rank_plans);
  if (!program) return program.error();
  out.program = std::move(program).value();
  for (const codegen::GeneratedFile& file : out.program.files) out.files.push_back({file.path, file.text});
  return out;
}

std::string lower_bound_text(const Plan& plan, const IterationLowerBound& bound) {
  if (!bound.found) return "";
  std::string rounds;
  for (size_t i = 0; i < bound.rounds.size() && i < 8; ++i) rounds += (i ? "+" : "") + std::to_string(bound.rounds[i]);
  if (bound.rounds.size() > 8) rounds += fmt::format("+... ({} rounds)", bound.rounds.size());
  const double distance = bound.ms > 0 ? 100.0 * (plan.summary.simulated_ms / bound.ms - 1.0) : 0.0;
  const double room_ms = bound.ms - bound.compute_ms - bound.input_ms;
  std::string waits;
  if (bound.input_ms > 0) waits += fmt::format(", {:.3f} ms for the first task's input", bound.input_ms);
  if (room_ms > 1e-9) waits += fmt::format(", {:.3f} ms to make room", room_ms);
  return fmt::format("lower bound: {:.3f} ms (rounds {}, every task at its fastest option that fits, micro-batches "
                     "included{}; no plan at this budget is faster); the plan is {:+.1f}% above it\n",
                     bound.ms, rounds, waits, distance);
}

std::string plan_summary_text(const Plan& plan, const std::string& device_line) {
  const PlanSummary& s = plan.summary;
  std::string out;
  out += fmt::format("model: {} ({})\n", plan.model_name, plan.model_digest);
  out += device_line + "\n";
  out += fmt::format("cost model: {}\n",
                     describe_cost_model({plan.cost_model_kind, plan.math_mode, plan.cost_model_error}));
  out += fmt::format("budget: {} = resident {} + arena {}; peak arena {}\n", format_bytes(plan.budget_bytes),
                     format_bytes(plan.resident_region_bytes), format_bytes(plan.arena_bytes),
                     format_bytes(s.peak_arena_bytes));
  out += fmt::format("batch: {} as {} round{} of sub-batch {}\n", plan.batch, plan.sub_batches.size(),
                     plan.sub_batches.size() == 1 ? "" : "s", plan.sub_batch);
  const double overhead = s.ideal_ms > 0 ? 100.0 * (s.simulated_ms / s.ideal_ms - 1.0) : 0.0;
  out += fmt::format("time: {:.3f} ms simulated, {:.3f} ms ideal ({:+.1f}%)\n", s.simulated_ms, s.ideal_ms,
                     overhead);
  out += fmt::format("copies: {} offloads ({} to host), {} prefetches ({} to device), stall {:.3f} ms\n",
                     s.offload_count, format_bytes(s.bytes_to_host), s.prefetch_count,
                     format_bytes(s.bytes_to_device), s.stall_ms);
  if (s.defragmentation_count > 0 || s.bytes_to_host > 0 || s.move_count > 0)
    out += fmt::format("memory: peak live {}, fragmentation {:.1f}%, {} defragmentation{}{}\n",
                       format_bytes(s.peak_live_bytes), 100.0 * s.fragmentation, s.defragmentation_count,
                       s.defragmentation_count == 1 ? "" : "s",
                       s.move_count == 0 ? std::string()
                                         : fmt::format(", {} move{} on the device ({})", s.move_count,
                                                       s.move_count == 1 ? "" : "s", format_bytes(s.bytes_moved)));
  for (const std::string& note : s.notes) out += "note: " + note + "\n";
  out += fmt::format("verified: {} steps, {} buffers, {} events: no violations\n", plan.steps.size(),
                     plan.buffers.size(), plan.event_count);
  return out;
}

}  // namespace mplan::driver
