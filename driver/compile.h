#pragma once
// `mplan compile` as a library (docs/architecture.md, "driver"): the flags as
// given, checked once into one settings struct, then the pipeline -- the
// model, the TDFG, the cost model, the plan, the verifier, the program -- into
// one result that the command prints and writes. Every flag is checked before
// anything is computed; nothing is returned unless the plan is made and
// verified.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/output_dir.h"
#include "codegen/target.h"
#include "core/error.h"
#include "driver/cost_source.h"
#include "driver/data_parallel_compile.h"
#include "planner/lower_bound.h"
#include "planner/planner.h"

namespace mplan::driver {

// The flags as the command line gave them; `*_given` says which were.
struct CompileFlags {
  std::string model_path;
  std::string budget;
  std::string device;
  std::string profile;  // a recorded profile.json instead of the analytic model of --device
  std::string out_dir;
  int64_t batch = 0;
  int64_t sub_batch = 0;
  int copy_engines = 0;
  bool batch_given = false, sub_batch_given = false, copy_engines_given = false;
  bool no_prefetch = false, lean_algorithms = false;
  bool no_recompute = false, no_recompute_convolutions = false, no_early_offload = false, no_early_drops = false;
  bool no_refinement = false;
  bool no_load_ahead = false;
  bool no_compaction = false;
  bool no_memory_saving_variants = false;
  std::string batchnorm = "prefer-one";  // planner/planner.h BatchnormRounds
  bool batchnorm_given = false;
  std::string workspace = "auto";  // planner/workspace_mode.h
  bool workspace_given = false;
  std::string dump_lp;          // the WD problem in CPLEX LP format (wd modes)
  std::string precision;        // "": the model's; fp32, tf32, bf16 or fp16 (ops/precision.h)
  std::string policy = "mplan";  // planner/policy.h
  std::string target;           // cpu|cuda; "": cuda where a GPU is present, else cpu
  bool allow_oversubscribe = false;  // a budget above the device's memory
  bool build = false;                // also build DIR/build/train
  bool plan_only = false;            // the plan and its views, no program
  DataParallelFlags data_parallel;   // --gpus, --machine, --stagger, --bucket-size
};

// The flags, checked: everything compile needs besides the files.
struct CompileSettings {
  std::string model_path;
  std::string out_dir;
  CostSource cost;
  PlanOptions plan;  // the budget, the batch (0: the model's), the policy and its levers
  codegen::Target target = codegen::Target::cpu;
  std::string target_line;  // what compile says of the target
  std::optional<Precision> precision;  // replaces the model's precision and math
  bool allow_oversubscribe = false;
  std::string dump_lp;
  bool build = false;
  bool plan_only = false;  // no program: plan.json, trace.json, memory.svg and the model copy
  // mplan's search also plans the model with its memory-saving operator
  // variants and keeps the faster (driver/planned_model.h).
  bool memory_saving_variants = true;
  // Data-parallel training on several GPUs (docs/multi-gpu.md): the budget
  // is per GPU, the batch the global one.
  DataParallelSettings data_parallel;
};

// Checks every flag that needs no file (a typo costs nothing): sizes, names,
// ranges, flags that exclude each other or do not apply to the policy, and
// that no output is an input. Errors are of kind usage and name the flag.
Result<CompileSettings> check_compile_flags(const CompileFlags& flags);

struct CompileResult {
  PlanResult planned;                 // its plan, with the names of tasks and blocks
  std::vector<std::string> model_notes;  // what an ONNX import noted
  std::string device_line;            // "device: ..."
  std::vector<std::string> warnings;  // for stderr: the cost model's, a budget allowed above the device's memory
  // The proven lower bound at the budget (planner/lower_bound.h); not found
  // in the workspace modes that split a kernel into micro-batches.
  IterationLowerBound lower_bound;
  // Which layers took their memory-saving backward (driver/planned_model.h);
  // "" where none did.
  std::string variants_line;
  std::string copies_line;  // a 16-bit model: how its weight copies are made (weight_copies_text)
  // The evaluation pass's plan (driver/evaluation_plan.h), with the program: "" without one.
  std::string evaluation_line;
  // Several ranks: what compile prints of them ("" for one GPU), and the
  // plans of ranks whose plan differs from rank 0's (written beside plan.json).
  std::string ranks_text;
  std::vector<PlanResult> other_rank_plans;
  codegen::GeneratedProgram program;  // train.cpp, CMakeLists.txt and what runs otherwise than planned
  // Everything the output folder gets: plan.json, trace.json, memory.svg,
  // model.yaml (the model, for `mplan verify DIR`) and the program with its
  // evaluation plan (evaluation-plan.json).
  std::vector<codegen::OutputFile> files;
};

// The copy of the model beside plan.json, so that `mplan verify DIR` needs no --model.
inline constexpr const char* kModelCopyFile = "model.yaml";

// Plans, verifies and generates. Errors: the model or another input is bad
// (naming the file), the budget is above the device's memory without
// allow_oversubscribe (usage), no plan fits (infeasible), a plan fails
// verification (internal: a planner bug, never the user's).
Result<CompileResult> compile(const CompileSettings& settings);

// What compile prints about the plan: model, cost model, budget, batch,
// time, copies, memory and notes, one fact a line.
std::string plan_summary_text(const Plan& plan, const std::string& device_line);

// "lower bound: ..." for compile's output: the bound, the rounds that attain
// it and the plan's distance to it; empty when there is none.
std::string lower_bound_text(const Plan& plan, const IterationLowerBound& bound);

}  // namespace mplan::driver
