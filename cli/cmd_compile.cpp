// `mplan compile model.yaml|model.onnx --budget SIZE [--device NAME|FILE | --profile FILE] [--batch B]
//  [--copy-engines 1|2] [--sub-batch b] [--policy NAME] -o DIR`: plans one
// training iteration under the budget with a policy (planner/policy.h; the
// default, mplan, is mplan's own plan search, planner/planner.h; the others
// are the papers' policies, the same plans as the `mplan compare` rows of
// those names), checks the plan with the independent verifier
// (planner/verify.h) and writes DIR/plan.json, DIR/trace.json,
// DIR/memory.svg, DIR/model.yaml (the model, for `mplan verify DIR`) and the
// program. Every flag is checked before anything is computed, nothing is
// written unless the plan is made and verified, and the folder is replaced as
// one unit (codegen/output_dir.h): a failure or a kill leaves the previous
// output as it was.

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/model_input.h"
#include "codegen/codegen.h"
#include "codegen/output_dir.h"
#include "core/bytes.h"
#include "core/input_file.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "planner/memory_svg.h"
#include "planner/microbatch/wd_optimizer.h"
#include "planner/plan_json.h"
#include "planner/planner.h"
#include "planner/policy.h"
#include "planner/trace.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/install_paths.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {

namespace {

#ifndef MPLAN_VERSION_TEXT
#define MPLAN_VERSION_TEXT "0.1.0"
#endif

// The papers' GPU (moDNN, vDNN): plans are for it unless the user says otherwise.
constexpr const char* kDefaultDevice = "k40";

struct CompileOptions {
  std::string model_path;
  std::string budget_text;
  std::string device;
  std::string profile;  // a recorded profile.json instead of the analytic model of --device
  std::string out_dir;
  int64_t batch = 0;
  int64_t sub_batch = 0;
  int copy_engines = 0;
  bool batch_given = false, sub_batch_given = false, copy_engines_given = false;
  bool no_prefetch = false, lean_algorithms = false;
  bool no_recompute = false, no_early_offload = false;
  std::string batchnorm = "prefer-one";  // --batchnorm (planner/planner.h BatchnormRounds)
  bool batchnorm_given = false;
  std::string workspace = "undivided";  // --workspace (planner/workspace_mode.h)
  std::string dump_lp;                  // --dump-lp: the WD problem in CPLEX LP format (wd modes)
  std::string policy = "mplan";         // --policy (planner/policy.h)
  bool workspace_given = false;
  bool build = false;  // --build: also cmake-configure and build DIR/build/train (codegen, cg)
  std::string target;  // --target cpu|cuda; "": cuda where a GPU is present, else cpu
  bool allow_oversubscribe = false;  // --allow-oversubscribe: a budget above the device's memory
};

struct Checked {
  int64_t budget_bytes = 0;
  WorkspaceMode workspace;
  PolicyKind policy = PolicyKind::mplan;
  codegen::Target target = codegen::Target::cpu;
  std::string target_line;  // what compile prints about the target
  PlanOptions::BatchnormRounds batchnorm = PlanOptions::BatchnormRounds::prefer_one;
};

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

// Flag checks that need no file: done first so that a typo costs nothing.
Checked check_flags(const CompileOptions& o) {
  Checked c;
  Result<int64_t> budget = parse_bytes(o.budget_text);
  if (!budget.ok())
    fail_usage(fmt::format("--budget '{}': {}", o.budget_text,
                           budget.error().message));
  if (*budget <= 0) fail_usage(fmt::format("--budget '{}': the budget must be more than 0 bytes", o.budget_text));
  c.budget_bytes = *budget;
  Result<WorkspaceMode> workspace = parse_workspace_mode(o.workspace);
  if (!workspace.ok()) fail_usage(workspace.error().message);
  c.workspace = *workspace;
  if (!o.dump_lp.empty() && c.workspace.use != WorkspaceUse::wd && c.workspace.use != WorkspaceUse::wd_auto)
    fail_usage(fmt::format("--dump-lp needs a WD workspace mode (--workspace wd:TOTAL or wd:auto), not '{}'",
                     o.workspace));
  if (o.batch_given && o.batch <= 0)
    fail_usage(fmt::format("--batch must be a positive number of samples, got {}", o.batch));
  if (o.sub_batch_given && o.sub_batch <= 0)
    fail_usage(fmt::format("--sub-batch must be a positive number of samples, got {}", o.sub_batch));
  if (o.copy_engines_given && o.copy_engines != 1 && o.copy_engines != 2)
    fail_usage(fmt::format("--copy-engines must be 1 (one copy stream shared by both directions) or 2 (one per "
                     "direction), got {}",
                     o.copy_engines));
  if (o.batchnorm == "prefer-one") c.batchnorm = PlanOptions::BatchnormRounds::prefer_one;
  else if (o.batchnorm == "one") c.batchnorm = PlanOptions::BatchnormRounds::one;
  else if (o.batchnorm == "any") c.batchnorm = PlanOptions::BatchnormRounds::any;
  else fail_usage(fmt::format("--batchnorm '{}': expected prefer-one, one or any", o.batchnorm));
  if (!parse_policy(o.policy, &c.policy))
    fail_usage(fmt::format("--policy '{}': unknown policy; expected one of {}", o.policy, policy_names()));
  // The layer-wise policies follow their papers' rules and have none of the
  // scheduler's knobs: refuse rather than ignore them.
  if (c.policy != PolicyKind::mplan && c.policy != PolicyKind::modnn) {
    const char* flag = o.sub_batch_given        ? "--sub-batch"
                       : o.copy_engines_given   ? "--copy-engines"
                       : o.no_prefetch          ? "--no-prefetch"
                       : o.lean_algorithms      ? "--lean-algorithms"
                       : o.workspace_given      ? "--workspace"
                       : !o.dump_lp.empty()     ? "--dump-lp"
                       : o.no_recompute         ? "--no-recompute"
                       : o.no_early_offload     ? "--no-early-offload"
                       : o.batchnorm_given      ? "--batchnorm"
                                                : nullptr;
    if (flag != nullptr)
      fail_usage(fmt::format("{} is an option of the planner (--policy mplan or modnn), not of --policy {}", flag,
                             o.policy));
  }
  if (c.policy == PolicyKind::modnn) {
    // moDNN as published has neither lever.
    const char* flag = o.no_recompute ? "--no-recompute" : o.no_early_offload ? "--no-early-offload" : nullptr;
    if (flag != nullptr)
      fail_usage(fmt::format("{} is a lever of mplan's planner; --policy modnn has none to turn off", flag));
  }
  if (!o.device.empty() && !o.profile.empty())
    fail_usage("--device and --profile exclude each other: a profile names its own device");
  if (!o.target.empty()) {
    if (!codegen::parse_target(o.target, &c.target))
      fail_usage(fmt::format("--target '{}': expected cpu or cuda", o.target));
    c.target_line = fmt::format("target: {}\n", o.target);
  } else {
    c.target = gpu_present() ? codegen::Target::cuda : codegen::Target::cpu;
    c.target_line = c.target == codegen::Target::cuda
                        ? "target: cuda (this machine has an NVIDIA GPU; --target cpu for the CPU program)\n"
                        : "target: cpu (no GPU on this machine; --target cuda writes the CUDA program)\n";
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (o.out_dir.empty()) fail_usage("-o: expected an output folder");
  if (fs::exists(o.out_dir, ec) && !fs::is_directory(o.out_dir, ec))
    fail_usage(fmt::format("-o '{}': exists and is not a folder", o.out_dir));
  // The output folder is replaced as a whole: no input may live in it, and
  // --dump-lp must not name an input.
  const std::vector<std::string> inputs = {o.model_path, o.profile,
                                           o.device.find('/') != std::string::npos ? o.device : std::string()};
  refuse_overwriting_inputs("-o", o.out_dir, inputs, /*output_is_folder=*/true);
  if (!o.dump_lp.empty()) refuse_overwriting_inputs("--dump-lp", o.dump_lp, inputs);
  return c;
}

std::string summary_text(const Plan& plan, const std::string& device_line, size_t events) {
  const PlanSummary& s = plan.summary;
  std::string out;
  out += fmt::format("model: {} ({})\n", plan.model_name, plan.model_digest);
  out += device_line;
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
  if (s.defragmentation_count > 0 || s.bytes_to_host > 0)
    out += fmt::format("memory: peak live {}, fragmentation {:.1f}%, {} defragmentation{}\n",
                       format_bytes(s.peak_live_bytes), 100.0 * s.fragmentation, s.defragmentation_count,
                       s.defragmentation_count == 1 ? "" : "s");
  for (const std::string& note : s.notes) out += "note: " + note + "\n";
  out += fmt::format("verified: {} steps, {} buffers, {} events: no violations\n", plan.steps.size(),
                     plan.buffers.size(), events);
  return out;
}

// --build: the two cmake commands of docs/generated-program.md, output shown.
void build_program(const std::string& dir) {
  auto quoted = [](const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  const std::string build_dir = dir + "/build";
  const std::string configure = "cmake -S " + quoted(dir) + " -B " + quoted(build_dir) + " > " +
                                quoted(build_dir + ".log") + " 2>&1";
  std::error_code ec;
  if (std::filesystem::exists(build_dir, ec) && !std::filesystem::is_directory(build_dir, ec))
    fail(fmt::format("--build: {} exists and is not a folder; remove it (the plan and program are written)",
                     build_dir),
         ErrorKind::io);
  std::filesystem::create_directories(build_dir, ec);
  if (ec) fail(fmt::format("--build: cannot create {}: {}", build_dir, ec.message()), ErrorKind::io);
  if (std::system(configure.c_str()) != 0)
    fail(fmt::format("--build: cmake could not configure {} (log: {}.log)", dir, build_dir), ErrorKind::io);
  const std::string build = "cmake --build " + quoted(build_dir) + " -j2 >> " + quoted(build_dir + ".log") + " 2>&1";
  if (std::system(build.c_str()) != 0)
    fail(fmt::format("--build: cmake could not build {} (log: {}.log)", dir, build_dir), ErrorKind::io);
  fmt::print("built: {}/train (run it with --steps N; --help for its flags)\n", build_dir);
}

void run_compile(const CompileOptions& o) {
  const Checked checked = check_flags(o);
  // The model's text is kept: compile writes a copy beside the plan, so that
  // `mplan verify DIR` needs no --model (issue 12); an .onnx model's copy is
  // the YAML it was imported as.
  const ModelInput input = load_model_or_onnx(o.model_path, o.batch_given ? o.batch : 0);
  const std::string& model_text = input.yaml;
  const Model& model = input.model;
  const int64_t batch = o.batch_given ? o.batch : model.batch;
  if (o.batch_given) {
    if (Status s = check_batch(model, o.batch, "--batch"); !s) fail_usage(s.error().message);
  }
  if (o.sub_batch_given) {
    if (o.sub_batch > batch)
      fail_usage(fmt::format("--sub-batch {} is larger than the batch {}", o.sub_batch, batch));
  }

  const Tdfg tdfg = build_tdfg(model);
  std::string device_line;
  std::unique_ptr<CostModel> cost;
  if (!o.profile.empty()) {
    Profile profile = unwrap(load_profile(o.profile));
    device_line = fmt::format("device: {} (recorded profile {})\n", profile.device_name, o.profile);
    if (Status s = check_profile_reaches_batch(profile, batch, o.profile); !s) fail(s.error());
    // The profile's times are in its own math: a model that asks for another
    // is planned with the profile's, and says so (docs/profile-format.md, "math").
    if (model.math != "default" && !profile.math_mode.empty() && model.math != profile.math_mode)
      fmt::print(stderr,
                 "mplan: warning: {} asks for math {}, but the profile's times are in {}: the plan is priced, and "
                 "the program computes, in {}; profile the model in {} to plan in it\n",
                 o.model_path, model.math, profile.math_mode, profile.math_mode, model.math);
    warn_untimed_kernel_tasks(profile, tdfg, o.profile);
    cost = unwrap(RecordedCostModel::create(std::move(profile), tdfg, {}, o.profile));
  } else {
    Device device;
    if (o.device.empty()) {
      device = unwrap(load_device(kDefaultDevice));
      device_line = fmt::format("device: {} (default; use --device to choose)\n", device.name);
    } else {
      Result<Device> loaded = load_device(o.device);
      if (!loaded.ok()) {
        fail(fmt::format("--device '{}': {}", o.device, loaded.error().to_string()), loaded.error().kind);
      }
      device = std::move(loaded).value();
      device_line = fmt::format("device: {}\n", device.name);
    }
    const Result<MathMode> math = resolve_math_mode(device, model.math);
    if (!math.ok()) fail(fmt::format("{}: {}", o.model_path, math.error().message));
    cost = std::make_unique<AnalyticCostModel>(device, *math);
  }
  // A budget the device does not have: the program would fail when it
  // allocates its arena (issue 12). Refused unless the user says so.
  if (checked.budget_bytes > cost->device_memory_bytes()) {
    if (!o.allow_oversubscribe)
      fail_usage(fmt::format("--budget {} is more than the device's memory ({}, {}): the program could not "
                             "allocate it. Give a budget up to the device's memory, or pass --allow-oversubscribe "
                             "if the device really has more",
                             format_bytes(checked.budget_bytes), format_bytes(cost->device_memory_bytes()),
                             cost->describe()));
    fmt::print(stderr, "mplan: warning: --budget {} is more than the device's memory ({}); allowed by "
                       "--allow-oversubscribe\n",
               format_bytes(checked.budget_bytes), format_bytes(cost->device_memory_bytes()));
  }

  PolicyOptions options;
  options.budget_bytes = checked.budget_bytes;
  options.batch = o.batch_given ? o.batch : 0;
  options.scheduler.sub_batch = o.sub_batch_given ? o.sub_batch : 0;
  options.scheduler.copy_engines = o.copy_engines_given ? o.copy_engines : 0;
  options.scheduler.prefetch = !o.no_prefetch;
  options.scheduler.select_algorithms = !o.lean_algorithms;
  options.scheduler.recompute = !o.no_recompute;
  options.scheduler.early_offload = !o.no_early_offload;
  options.scheduler.batchnorm_rounds = checked.batchnorm;
  options.scheduler.workspace = checked.workspace.use;
  options.scheduler.workspace_bytes = checked.workspace.bytes;
  PolicyOutcome outcome = run_policy(checked.policy, tdfg, *cost, options);
  if (!outcome.feasible) {
    // moDNN's scheduler names the flag and the minimum itself (Eq. 2).
    if (checked.policy == PolicyKind::mplan || checked.policy == PolicyKind::modnn)
      fail(outcome.note, ErrorKind::infeasible);
    if (checked.policy == PolicyKind::ideal)
      fail(fmt::format("--policy ideal: the ideal plan (unlimited memory) {} of {}; it is for comparison "
                       "(`mplan compare`) and compiles only where it fits",
                       outcome.note, format_bytes(checked.budget_bytes)),
           ErrorKind::infeasible);
    fail(fmt::format("--policy {}: no plan within --budget {}: {}", o.policy, o.budget_text, outcome.note),
         ErrorKind::infeasible);
  }
  Plan plan = std::move(outcome.plan);
  const CostModelInfo cost_info = cost->info();
  plan.cost_model_kind = cost_info.kind;
  plan.math_mode = cost_info.math_mode;
  plan.cost_model_error = cost_info.expected_error;
  const WorkspaceReport& workspace_report = outcome.workspace_report;
  const std::string policy_line =
      fmt::format("policy: {}{}\n", o.policy, outcome.note.empty() ? "" : " (" + outcome.note + ")");
  const std::string recompute_line =
      outcome.recomputed_tasks > 0 ? fmt::format("recomputed: {} forward steps run again in the backward pass\n",
                                                 outcome.recomputed_tasks)
                                   : std::string();
  if (plan.task_names.empty())
    for (const Task& t : tdfg.tasks) plan.task_names.push_back(t.name);
  if (plan.block_names.empty())
    for (const Block& b : tdfg.blocks) plan.block_names.push_back(b.name);

  // A plan the verifier rejects is a planner bug, never the user's: refuse to write it.
  const std::vector<Violation> violations = verify_plan(plan, tdfg);
  if (!violations.empty()) {
    std::string list;
    const size_t shown = std::min<size_t>(violations.size(), 50);
    for (size_t i = 0; i < shown; ++i) list += "\n  " + to_string(violations[i]);
    if (shown < violations.size()) list += fmt::format("\n  ... and {} more", violations.size() - shown);
    fail(fmt::format("internal error: the planner made a plan that fails verification ({} violation{}); "
                     "nothing was written. Please report this with the model and flags.{}",
                     violations.size(), violations.size() == 1 ? "" : "s", list),
         ErrorKind::internal);
  }

  // The training program: DIR/train.cpp and DIR/CMakeLists.txt (codegen/codegen.h).
  codegen::CodegenOptions codegen_options;
  codegen_options.mplan_version = MPLAN_VERSION_TEXT;
  codegen_options.model_file = o.model_path;
  codegen_options.target = checked.target;
  // The runtime this mplan ships (installed, $MPLAN_HOME, or its source tree).
  codegen_options.runtime_dir = install_paths().runtime_dir;
  const codegen::GeneratedProgram program = unwrap(codegen::emit_program(model, tdfg, plan, codegen_options));

  const std::string plan_text = plan_to_json(plan);
  const std::string trace_text = plan_to_trace_json(plan);
  const std::string svg_text = plan_memory_svg(plan);

  // The whole output goes into a temporary folder beside DIR and is swapped
  // in at once (codegen/output_dir.h): a failure or a kill leaves the
  // previous output exactly as it was, never a mix of two plans.
  namespace fs = std::filesystem;
  std::vector<codegen::OutputFile> files = {{"plan.json", plan_text},
                                            {"trace.json", trace_text},
                                            {"memory.svg", svg_text},
                                            {kModelCopyFile, model_text}};
  for (const codegen::GeneratedFile& file : program.files) files.push_back({file.path, file.text});
  if (!o.dump_lp.empty()) {
    // Written first, through a temporary file: a failing --dump-lp leaves the
    // output folder untouched. Inside DIR it becomes one of the folder's files.
    std::error_code ec;
    const fs::path lp = fs::weakly_canonical(fs::absolute(o.dump_lp), ec);
    const fs::path out = fs::weakly_canonical(fs::absolute(o.out_dir), ec);
    const std::string relative = lp.lexically_relative(out).string();
    const bool inside = !relative.empty() && relative != "." && relative.rfind("..", 0) != 0;
    const std::string temporary = fmt::format("{}.tmp-{}", inside ? (fs::temp_directory_path() / "mplan-lp").string()
                                                                  : o.dump_lp,
                                              static_cast<long>(::getpid()));
    Status dumped =
        microbatch::dump_wd_lp(workspace_report.wd_problem.kernels, workspace_report.pool_bytes, temporary);
    if (!dumped.ok()) {
      fs::remove(temporary, ec);
      fail(fmt::format("--dump-lp '{}': {}; nothing was written", o.dump_lp, dumped.error().message),
           ErrorKind::io);
    }
    if (inside) {
      Result<std::string> text = read_input_file(temporary, "the LP file", int64_t{1} << 34);
      fs::remove(temporary, ec);
      if (!text.ok()) fail(text.error());
      files.push_back({relative, std::move(text).value()});
    } else {
      fs::rename(temporary, o.dump_lp, ec);
      if (ec) {
        fs::remove(temporary, ec);
        fail(fmt::format("--dump-lp '{}': {}; nothing was written", o.dump_lp, ec.message()), ErrorKind::io);
      }
    }
  }
  if (Status written = codegen::replace_output_folder(o.out_dir, files); !written) fail(written.error());
  const fs::path dir(o.out_dir);

  fmt::print("{}", policy_line);
  fmt::print("{}", summary_text(plan, device_line, static_cast<size_t>(plan.event_count)));
  fmt::print("{}", recompute_line);
  fmt::print("wrote: {}, {}, {}, {} (the model, for `mplan verify`)\n", (dir / "plan.json").string(),
             (dir / "trace.json").string(), (dir / "memory.svg").string(), (dir / kModelCopyFile).string());
  fmt::print("{}", checked.target_line);
  fmt::print("program: {}, {}\n", (dir / "train.cpp").string(), (dir / "CMakeLists.txt").string());
  // Never a silent substitution: what the program does otherwise than planned.
  // The output is in place by now: a failing stderr (a full disk) must not
  // turn the completed run into an error, so no throwing fmt::print here.
  // A deep model on another target substitutes thousands of algorithms
  // (ResNet-1001 on the CPU: 2,900): the first few here, every one in train.cpp.
  constexpr size_t kWarningsShown = 12;
  for (size_t i = 0; i < program.warnings.size() && i < kWarningsShown; ++i)
    std::fputs(("warning: " + program.warnings[i] + "\n").c_str(), stderr);
  if (program.warnings.size() > kWarningsShown)
    std::fputs(fmt::format("warning: ... and {} more like these, every one in the header comment of {}\n",
                           program.warnings.size() - kWarningsShown, (dir / "train.cpp").string())
                   .c_str(),
               stderr);
  if (o.build) build_program(dir.string());
}

void setup_compile(CLI::App& command) {
  auto o = std::make_shared<CompileOptions>();
  command.add_option("model", o->model_path, "Model file (YAML), or an ONNX file imported as `mplan import` does")
      ->required();
  command.add_option("--budget", o->budget_text, "Device memory the program may use, e.g. 4GiB, 512MiB")
      ->required();
  command.add_option("--device", o->device,
                     "Device the plan is for: a name in examples/devices (k40, p100, v100, ...) or a device "
                     "file (default: k40, the papers' GPU)");
  command.add_option("--profile", o->profile,
                     "Plan with a recorded cost model (profile.json from `mplan profile`) instead of --device");
  auto* batch = command.add_option("--batch", o->batch, "Mini-batch size B (default: the model's batch)");
  auto* sub_batch =
      command.add_option("--sub-batch", o->sub_batch, "Fix the sub-batch size b (default: chosen by the planner)");
  auto* engines = command.add_option("--copy-engines", o->copy_engines,
                                     "1: one copy stream for both directions (moDNN); 2: one per direction "
                                     "(default: what the device has)");
  command.add_flag("--no-prefetch", o->no_prefetch,
                   "Load offloaded blocks only when needed (no prefetching; the planner otherwise tries both)");
  command.add_flag("--lean-algorithms", o->lean_algorithms,
                   "Always use the conv algorithm with the least workspace (no Eq. 5 selection)");
  command.add_flag("--no-recompute", o->no_recompute,
                   "Never drop and recompute blocks (mplan's planner otherwise does where it costs less than "
                   "offloading them)");
  command.add_flag("--no-early-offload", o->no_early_offload,
                   "Offload blocks only when an allocation needs their room (mplan's planner otherwise copies "
                   "long-lived blocks out early when the round does not fit)");
  auto* batchnorm = command.add_option(
      "--batchnorm", o->batchnorm,
      "Rounds of a model with batchnorm layers (statistics are per round): prefer-one (default: one round, "
      "full-batch statistics, unless that needs offloading or recomputation and is more than 10% slower than "
      "splitting); one (one round whenever it fits); any (the sub-batch by simulated time alone)");
  command.add_option("--policy", o->policy,
                     "Scheduling policy (planner/policy.h): mplan (default: mplan's own planner), modnn (moDNN as "
                     "published), vdnn-all-m, vdnn-all-p, vdnn-conv-m, vdnn-conv-p, vdnn-dyn, vdnn+, superneurons, "
                     "or ideal (only where it fits the budget)");
  auto* workspace = command.add_option("--workspace", o->workspace,
                     "Conv workspace use (mu-cuDNN): undivided (default); dynamic (each conv may run as "
                     "micro-batches chosen by Eq. 5's gain); wr:LIMIT (WR optimum under a per-kernel limit, "
                     "e.g. wr:64MiB); wd:TOTAL (a pool of TOTAL bytes at the top of the arena, each kernel's fastest "
                     "configuration within it, e.g. wd:1GiB); wd:auto (the pool size that simulates fastest)");
  command.add_option("--dump-lp", o->dump_lp,
                     "With --workspace wd:*: write mu-cuDNN's WD integer program (Eq. 1-4, CPLEX LP format) for "
                     "the plan's kernels and pool to this file, for comparison (the plan itself gives every kernel "
                     "the whole pool in turn)");
  command.add_option("-o,--out", o->out_dir, "Output folder (created if missing)")->required();
  command.add_option("--target", o->target,
                     "Backend of the generated program: cpu (runtime/cpu) or cuda (runtime/cuda: cuDNN, cuBLAS); "
                     "default: cuda where this machine has an NVIDIA GPU, else cpu");
  command.add_flag("--build", o->build, "Also build the training program: cmake -S DIR -B DIR/build && cmake --build DIR/build");
  command.add_flag("--allow-oversubscribe", o->allow_oversubscribe,
                   "Accept a --budget above the device's memory (the device file's or profile's)");
  command.callback([o, batch, sub_batch, engines, workspace, batchnorm] {
    o->batchnorm_given = batchnorm->count() > 0;
    o->workspace_given = workspace->count() > 0;
    o->batch_given = batch->count() > 0;
    o->sub_batch_given = sub_batch->count() > 0;
    o->copy_engines_given = engines->count() > 0;
    run_compile(*o);
  });
}

const Registration registration("compile",
                                "Plan one training iteration under a memory budget; write plan.json, trace.json, "
                                "memory.svg",
                                setup_compile, 20);

}  // namespace

}  // namespace mplan::cli
