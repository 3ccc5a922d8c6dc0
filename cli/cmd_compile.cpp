// `mplan compile model.yaml|model.onnx --budget SIZE [--device NAME|FILE | --profile FILE] [--batch B]
//  [--copy-engines 1|2] [--sub-batch b] [--policy NAME] -o DIR`: plans one
// training iteration under the budget with a policy (planner/policy.h; the
// default, mplan, is mplan's own plan search, planner/planner.h; the others
// are the papers' policies, the same plans as the `mplan compare` rows of
// those names), checks the plan with the independent verifier
// (planner/verify.h) and writes DIR/plan.json, DIR/trace.json,
// DIR/memory.svg, DIR/model.yaml (the model, for `mplan verify DIR`) and the
// program (not with --plan-only). Every flag is checked before anything is computed, nothing is
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
#include "codegen/output_dir.h"
#include "core/input_file.h"
#include "driver/compile.h"
#include "planner/microbatch/wd_optimizer.h"

namespace mplan::cli {

namespace {

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

// --dump-lp: mu-cuDNN's WD problem of the plan's kernels, through a temporary
// file so that a failure leaves the output folder untouched. Inside the
// output folder it becomes one of the folder's files.
void dump_lp(const driver::CompileSettings& s, const WorkspaceReport& report,
             std::vector<codegen::OutputFile>* files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path lp = fs::weakly_canonical(fs::absolute(s.dump_lp), ec);
  const fs::path out = fs::weakly_canonical(fs::absolute(s.out_dir), ec);
  const std::string relative = lp.lexically_relative(out).string();
  const bool inside = !relative.empty() && relative != "." && relative.rfind("..", 0) != 0;
  const std::string temporary = fmt::format("{}.tmp-{}", inside ? (fs::temp_directory_path() / "mplan-lp").string()
                                                                : s.dump_lp,
                                            static_cast<long>(::getpid()));
  Status dumped = microbatch::dump_wd_lp(report.wd_problem.kernels, report.pool_bytes, temporary);
  if (!dumped.ok()) {
    fs::remove(temporary, ec);
    fail(fmt::format("--dump-lp '{}': {}; nothing was written", s.dump_lp, dumped.error().message), ErrorKind::io);
  }
  if (inside) {
    Result<std::string> text = read_input_file(temporary, "the LP file", int64_t{1} << 34);
    fs::remove(temporary, ec);
    if (!text.ok()) fail(text.error());
    files->push_back({relative, std::move(text).value()});
    return;
  }
  fs::rename(temporary, s.dump_lp, ec);
  if (ec) {
    fs::remove(temporary, ec);
    fail(fmt::format("--dump-lp '{}': {}; nothing was written", s.dump_lp, ec.message()), ErrorKind::io);
  }
}

void run_compile(const driver::CompileFlags& flags) {
  const driver::CompileSettings settings = unwrap(driver::check_compile_flags(flags));
  driver::CompileResult result = unwrap(driver::compile(settings));
  for (const std::string& note : result.model_notes) fmt::print(stderr, "note: {}\n", note);
  for (const std::string& warning : result.warnings) fmt::print(stderr, "mplan: warning: {}\n", warning);
  if (!settings.dump_lp.empty()) dump_lp(settings, result.planned.workspace_report, &result.files);
  // The whole output goes into a temporary folder beside DIR and is swapped
  // in at once (codegen/output_dir.h): a failure or a kill leaves the
  // previous output exactly as it was, never a mix of two plans.
  if (Status written = codegen::replace_output_folder(settings.out_dir, result.files); !written) fail(written.error());
  const std::filesystem::path dir(settings.out_dir);
  const PlanResult& planned = result.planned;
  fmt::print("policy: {}{}\n", flags.policy, planned.note.empty() ? "" : " (" + planned.note + ")");
  fmt::print("{}", driver::plan_summary_text(planned.plan, result.device_line));
  if (!result.ranks_text.empty()) fmt::print("{}", result.ranks_text);
  fmt::print("{}", driver::lower_bound_text(planned.plan, result.lower_bound));
  if (!result.variants_line.empty()) fmt::print("{}\n", result.variants_line);
  if (!result.copies_line.empty()) fmt::print("{}\n", result.copies_line);
  if (!result.evaluation_line.empty()) fmt::print("{}\n", result.evaluation_line);
  if (planned.recomputed_tasks > 0)
    fmt::print("recomputed: {} forward steps run again in the backward pass\n", planned.recomputed_tasks);
  fmt::print("wrote: {}, {}, {}, {} (the model, for `mplan verify`)\n", (dir / "plan.json").string(),
             (dir / "trace.json").string(), (dir / "memory.svg").string(), (dir / driver::kModelCopyFile).string());
  for (const PlanResult& other : result.other_rank_plans)
    fmt::print("wrote: {} (the plan of rank {} and the ranks that run it)\n",
               (dir / driver::rank_plan_file(other.plan.data_parallel.rank)).string(), other.plan.data_parallel.rank);
  if (settings.plan_only) {
    fmt::print("program: none (--plan-only)\n");
    return;
  }
  fmt::print("{}\n", settings.target_line);
  fmt::print("evaluation plan: {}\n", (dir / "evaluation-plan.json").string());
  fmt::print("program: {}, {}\n", (dir / "train.cpp").string(), (dir / "CMakeLists.txt").string());
  // Never a silent substitution: what the program does otherwise than planned.
  // The output is in place by now: a failing stderr (a full disk) must not
  // turn the completed run into an error, so no throwing fmt::print here.
  // A deep model on another target substitutes thousands of algorithms
  // (ResNet-1001 on the CPU: 2,900): the first few here, every one in train.cpp.
  const std::vector<std::string>& warnings = result.program.warnings;
  constexpr size_t kWarningsShown = 12;
  for (size_t i = 0; i < warnings.size() && i < kWarningsShown; ++i)
    std::fputs(("warning: " + warnings[i] + "\n").c_str(), stderr);
  if (warnings.size() > kWarningsShown)
    std::fputs(fmt::format("warning: ... and {} more like these, every one in the header comment of {}\n",
                           warnings.size() - kWarningsShown, (dir / "train.cpp").string())
                   .c_str(),
               stderr);
  if (settings.build) build_program(dir.string());
}

void setup_compile(CLI::App& command) {
  auto o = std::make_shared<driver::CompileFlags>();
  command.add_option("model", o->model_path, "Model file (YAML), or an ONNX file imported as `mplan import` does")
      ->required();
  command.add_option("--budget", o->budget, "Device memory the program may use, e.g. 4GiB, 512MiB")
      ->required();
  command.add_option("--device", o->device,
                     "Device the plan is for: a name in examples/devices (k40, p100, v100, ...) or a device "
                     "file (default: k40, the papers' GPU)");
  command.add_option("--profile", o->profile,
                     "Plan with a recorded cost model (profile.json from `mplan profile`) instead of --device");
  auto* batch = command.add_option("--batch", o->batch, "Mini-batch size B (default: the model's batch)");
  command.add_option("--precision", o->precision,
                     "Precision of the tensors, replacing the model's precision and math: fp32, tf32, bf16 or fp16 "
                     "(docs/model-format.md); a 16-bit CUDA program computes in float between casts (a warning says so)");
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
  command.add_flag("--no-recompute-convolutions", o->no_recompute_convolutions,
                   "Recompute only the cheap layers, never a convolution (mplan's planner otherwise recomputes a "
                   "convolution, with its first run's algorithm, where its offload would stall the compute "
                   "stream for longer)");
  command.add_flag("--no-memory-saving-variants", o->no_memory_saving_variants,
                   "Plan every layer's plain backward (mplan's planner otherwise also plans the model with the "
                   "compact backward of each ReLU and max pool whose input or output it frees, and keeps the "
                   "faster plan; docs/planner.md)");
  command.add_flag("--no-early-offload", o->no_early_offload,
                   "Offload blocks only when an allocation needs their room (mplan's planner otherwise copies "
                   "long-lived blocks out early when the round does not fit)");
  command.add_flag("--no-early-drops", o->no_early_drops,
                   "Drop blocks for recomputation only when an allocation needs their room (mplan's planner "
                   "otherwise also tries dropping cheap outputs right after their last forward use when the "
                   "round does not fit, and keeps the faster plan)");
  command.add_flag("--no-refinement", o->no_refinement,
                   "Keep the best plan of the levers as it is (mplan's planner otherwise refines it one large "
                   "block at a time, dropping or offloading it right after its last forward use where the "
                   "simulation is faster; docs/planner.md)");
  command.add_flag("--no-load-ahead", o->no_load_ahead,
                   "Load offloaded blocks when their task needs them or just in time (mplan's planner otherwise "
                   "also simulates its best plans again loading each block ahead into the room their simulation "
                   "left free, and keeps the faster plan; docs/planner.md, \"Loads ahead\")");
  command.add_flag("--no-compaction", o->no_compaction,
                   "Never move blocks on the device to join free ranges (mplan's planner otherwise moves the "
                   "blocks that split a range where that costs less than offloading them; docs/planner.md, "
                   "\"Compaction\")");
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
                     "Conv workspace use (mu-cuDNN): auto (default: undivided, and dynamic too where a conv's "
                     "fastest algorithm needs more workspace than fits); undivided (one call per conv); dynamic "
                     "(each conv may run as "
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
  command.add_flag("--plan-only", o->plan_only,
                   "Write the plan (plan.json, trace.json, memory.svg, model.yaml) without a program: for `mplan "
                   "verify` and `mplan inspect`");
  command.add_option("--gpus", o->data_parallel.gpus,
                     "Data-parallel training on N GPUs (ranks, one process each under mpirun): the budget is per "
                     "GPU, the batch is split over them (docs/multi-gpu.md)");
  command.add_option("--machine", o->data_parallel.machine,
                     "The machine the GPUs are in: a machine file or a name in examples/machines (default: GPUs of "
                     "--device, each with a PCIe link of its own)");
  command.add_option("--stagger", o->data_parallel.stagger,
                     "How the ranks' plans differ where they share links: search (mplan's, the default), none, or "
                     "paper (multi-GPU vDNN's rule, with a vDNN policy)");
  command.add_option("--bucket-size", o->data_parallel.bucket_size,
                     "Gradient bytes per all-reduce bucket (default 25MiB, PyTorch DDP's)");
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
