// `mplan compile model.yaml|model.onnx --budget SIZE [--device NAME|FILE | --profile FILE] [--batch B]
//  [--copy-engines 1|2] [--sub-batch b] [--policy NAME] -o DIR`: plans one
// training iteration under the budget with a policy (planner/policy.h; the
// default, mplan, is moDNN's scheduler of planner/planner.h or, where one
// simulates faster, vDNN's or SuperNeurons' rules, the same plan as the
// `mplan compare` row of that name), checks the plan with the independent
// verifier (planner/verify.h) and writes DIR/plan.json, DIR/trace.json and
// DIR/memory.svg. Every flag is checked before anything is computed, and
// nothing is written unless the plan is made and verified.

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/model_input.h"
#include "codegen/codegen.h"
#include "frontend/bytes.h"
#include "frontend/parse.h"
#include "planner/memory_svg.h"
#include "planner/microbatch/wd_optimizer.h"
#include "planner/plan_json.h"
#include "planner/planner.h"
#include "planner/policy.h"
#include "planner/trace.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
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
  std::string workspace = "undivided";  // --workspace (planner/workspace_mode.h)
  std::string dump_lp;                  // --dump-lp: the WD problem in CPLEX LP format (wd modes)
  std::string policy = "mplan";         // --policy (planner/policy.h)
  bool workspace_given = false;
  bool build = false;  // --build: also cmake-configure and build DIR/build/train (codegen, cg)
  std::string target;  // --target cpu|cuda; "": cuda where a GPU is present, else cpu
};

struct Checked {
  int64_t budget_bytes = 0;
  WorkspaceMode workspace;
  PolicyKind policy = PolicyKind::mplan;
  codegen::Target target = codegen::Target::cpu;
  std::string target_line;  // what compile prints about the target
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
    fail(fmt::format("--budget '{}': {}", o.budget_text,
                     budget.error().message));
  if (*budget <= 0) fail(fmt::format("--budget '{}': the budget must be more than 0 bytes", o.budget_text));
  c.budget_bytes = *budget;
  Result<WorkspaceMode> workspace = parse_workspace_mode(o.workspace);
  if (!workspace.ok()) fail(workspace.error().message);
  c.workspace = *workspace;
  if (!o.dump_lp.empty() && c.workspace.use != WorkspaceUse::wd && c.workspace.use != WorkspaceUse::wd_auto)
    fail(fmt::format("--dump-lp needs a WD workspace mode (--workspace wd:TOTAL or wd:auto), not '{}'",
                     o.workspace));
  if (o.batch_given && o.batch <= 0)
    fail(fmt::format("--batch must be a positive number of samples, got {}", o.batch));
  if (o.sub_batch_given && o.sub_batch <= 0)
    fail(fmt::format("--sub-batch must be a positive number of samples, got {}", o.sub_batch));
  if (o.copy_engines_given && o.copy_engines != 1 && o.copy_engines != 2)
    fail(fmt::format("--copy-engines must be 1 (one copy stream shared by both directions) or 2 (one per "
                     "direction), got {}",
                     o.copy_engines));
  if (!parse_policy(o.policy, &c.policy))
    fail(fmt::format("--policy '{}': unknown policy; expected one of {}", o.policy, policy_names()));
  // The layer-wise policies follow their papers' rules and have none of the
  // scheduler's knobs: refuse rather than ignore them.
  if (c.policy != PolicyKind::mplan && c.policy != PolicyKind::modnn) {
    const char* flag = o.sub_batch_given        ? "--sub-batch"
                       : o.copy_engines_given   ? "--copy-engines"
                       : o.no_prefetch          ? "--no-prefetch"
                       : o.lean_algorithms      ? "--lean-algorithms"
                       : o.workspace_given      ? "--workspace"
                       : !o.dump_lp.empty()     ? "--dump-lp"
                                                : nullptr;
    if (flag != nullptr)
      fail(fmt::format("{} is an option of moDNN's scheduler (--policy mplan or modnn), not of --policy {}", flag,
                       o.policy));
  }
  if (!o.device.empty() && !o.profile.empty())
    fail("--device and --profile exclude each other: a profile names its own device");
  if (!o.target.empty()) {
    if (!codegen::parse_target(o.target, &c.target))
      fail(fmt::format("--target '{}': expected cpu or cuda", o.target));
    c.target_line = fmt::format("target: {}\n", o.target);
  } else {
    c.target = gpu_present() ? codegen::Target::cuda : codegen::Target::cpu;
    c.target_line = c.target == codegen::Target::cuda
                        ? "target: cuda (this machine has an NVIDIA GPU; --target cpu for the CPU program)\n"
                        : "target: cpu (no GPU on this machine; --target cuda writes the CUDA program)\n";
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.out_dir, ec) && !fs::is_directory(o.out_dir, ec))
    fail(fmt::format("-o '{}': exists and is not a folder", o.out_dir));
  return c;
}

std::string summary_text(const Plan& plan, const std::string& device_line, size_t events) {
  const PlanSummary& s = plan.summary;
  std::string out;
  out += fmt::format("model: {} ({})\n", plan.model_name, plan.model_digest);
  out += device_line;
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
  std::filesystem::create_directories(build_dir);
  if (std::system(configure.c_str()) != 0)
    fail(fmt::format("--build: cmake could not configure {} (log: {}.log)", dir, build_dir));
  const std::string build = "cmake --build " + quoted(build_dir) + " -j2 >> " + quoted(build_dir + ".log") + " 2>&1";
  if (std::system(build.c_str()) != 0)
    fail(fmt::format("--build: cmake could not build {} (log: {}.log)", dir, build_dir));
  fmt::print("built: {}/train (run it with --steps N; --help for its flags)\n", build_dir);
}

void run_compile(const CompileOptions& o) {
  const Checked checked = check_flags(o);
  const Model model = load_model_or_onnx(o.model_path, o.batch_given ? o.batch : 0);

  const Tdfg tdfg = build_tdfg(model);
  std::string device_line;
  std::unique_ptr<CostModel> cost;
  if (!o.profile.empty()) {
    Profile profile = unwrap(load_profile(o.profile));
    device_line = fmt::format("device: {} (recorded profile {})\n", profile.device_name, o.profile);
    cost = unwrap(RecordedCostModel::create(std::move(profile), tdfg, {}, o.profile));
  } else {
    Device device;
    if (o.device.empty()) {
      device = unwrap(load_device(kDefaultDevice));
      device_line = fmt::format("device: {} (default; use --device to choose)\n", device.name);
    } else {
      Result<Device> loaded = load_device(o.device);
      if (!loaded.ok()) fail(fmt::format("--device '{}': {}", o.device, loaded.error().to_string()));
      device = std::move(loaded).value();
      device_line = fmt::format("device: {}\n", device.name);
    }
    cost = std::make_unique<AnalyticCostModel>(device);
  }

  PolicyOptions options;
  options.budget_bytes = checked.budget_bytes;
  options.batch = o.batch_given ? o.batch : 0;
  options.scheduler.sub_batch = o.sub_batch_given ? o.sub_batch : 0;
  options.scheduler.copy_engines = o.copy_engines_given ? o.copy_engines : 0;
  options.scheduler.prefetch = !o.no_prefetch;
  options.scheduler.select_algorithms = !o.lean_algorithms;
  options.scheduler.workspace = checked.workspace.use;
  options.scheduler.workspace_bytes = checked.workspace.bytes;
  PolicyOutcome outcome = run_policy(checked.policy, tdfg, *cost, options);
  if (!outcome.feasible) {
    // moDNN's scheduler names the flag and the minimum itself (Eq. 2).
    if (checked.policy == PolicyKind::mplan || checked.policy == PolicyKind::modnn) fail(outcome.note);
    if (checked.policy == PolicyKind::ideal)
      fail(fmt::format("--policy ideal: the ideal plan (unlimited memory) {} of {}; it is for comparison "
                       "(`mplan compare`) and compiles only where it fits",
                       outcome.note, format_bytes(checked.budget_bytes)));
    fail(fmt::format("--policy {}: no plan within --budget {}: {}", o.policy, o.budget_text, outcome.note));
  }
  Plan plan = std::move(outcome.plan);
  const WorkspaceReport& workspace_report = outcome.workspace_report;
  const std::string policy_line =
      fmt::format("policy: {}{}\n", o.policy, outcome.note.empty() ? "" : " (" + outcome.note + ")");
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
                     violations.size(), violations.size() == 1 ? "" : "s", list));
  }

  // The training program: DIR/train.cpp and DIR/CMakeLists.txt (codegen/codegen.h).
  codegen::CodegenOptions codegen_options;
  codegen_options.mplan_version = MPLAN_VERSION_TEXT;
  codegen_options.model_file = o.model_path;
  codegen_options.target = checked.target;
  const codegen::GeneratedProgram program = unwrap(codegen::emit_program(model, tdfg, plan, codegen_options));

  const std::string plan_text = plan_to_json(plan);
  const std::string trace_text = plan_to_trace_json(plan);
  const std::string svg_text = plan_memory_svg(plan);

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) fail(fmt::format("-o '{}': cannot create the folder: {}", o.out_dir, ec.message()));
  const fs::path dir(o.out_dir);
  write_file_atomically((dir / "trace.json").string(), trace_text);
  write_file_atomically((dir / "memory.svg").string(), svg_text);
  for (const codegen::GeneratedFile& file : program.files)
    write_file_atomically((dir / file.path).string(), file.text);
  if (!o.dump_lp.empty()) {
    Status dumped = microbatch::dump_wd_lp(workspace_report.wd_problem.kernels, workspace_report.pool_bytes,
                                           o.dump_lp);
    if (!dumped.ok()) fail(fmt::format("--dump-lp '{}': {}", o.dump_lp, dumped.error().message));
  }
  // plan.json last: its presence means the whole output is there.
  write_file_atomically((dir / "plan.json").string(), plan_text);

  fmt::print("{}", policy_line);
  fmt::print("{}", summary_text(plan, device_line, static_cast<size_t>(plan.event_count)));
  fmt::print("wrote: {}, {}, {}\n", (dir / "plan.json").string(), (dir / "trace.json").string(),
             (dir / "memory.svg").string());
  fmt::print("{}", checked.target_line);
  fmt::print("program: {}, {}\n", (dir / "train.cpp").string(), (dir / "CMakeLists.txt").string());
  // Never a silent substitution: what the program does otherwise than planned.
  for (const std::string& warning : program.warnings) fmt::print(stderr, "warning: {}\n", warning);
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
  command.add_flag("--no-prefetch", o->no_prefetch, "Load offloaded blocks only when needed (no prefetching)");
  command.add_flag("--lean-algorithms", o->lean_algorithms,
                   "Always use the conv algorithm with the least workspace (no Eq. 5 selection)");
  command.add_option("--policy", o->policy,
                     "Scheduling policy (planner/policy.h): mplan (default: moDNN's scheduler, or vDNN's or "
                     "SuperNeurons' rules where they simulate faster; only moDNN's scheduler when a scheduler "
                     "flag is given), modnn, vdnn-all-m, vdnn-all-p, vdnn-conv-m, vdnn-conv-p, vdnn-dyn, vdnn+, "
                     "superneurons, or ideal (only where it fits the budget)");
  auto* workspace = command.add_option("--workspace", o->workspace,
                     "Conv workspace use (mu-cuDNN): undivided (default); dynamic (each conv may run as "
                     "micro-batches chosen by Eq. 5's gain); wr:LIMIT (WR optimum under a per-kernel limit, "
                     "e.g. wr:64MiB); wd:TOTAL (a pool of TOTAL bytes divided by the WD ILP, e.g. wd:1GiB); "
                     "wd:auto (the pool size that simulates fastest)");
  command.add_option("--dump-lp", o->dump_lp,
                     "With --workspace wd:*: write the WD integer program (CPLEX LP format) to this file");
  command.add_option("-o,--out", o->out_dir, "Output folder (created if missing)")->required();
  command.add_option("--target", o->target,
                     "Backend of the generated program: cpu (runtime/cpu) or cuda (runtime/cuda: cuDNN, cuBLAS); "
                     "default: cuda where this machine has an NVIDIA GPU, else cpu");
  command.add_flag("--build", o->build, "Also build the training program: cmake -S DIR -B DIR/build && cmake --build DIR/build");
  command.callback([o, batch, sub_batch, engines, workspace] {
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
