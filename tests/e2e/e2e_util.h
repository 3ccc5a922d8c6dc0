#pragma once
// Helpers of the end-to-end tests: plan a model in process (the stages'
// libraries, as `mplan compile` does), write the generated program, build it
// with cmake against the prebuilt runtime, run it, and read its weights.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "planner/planner.h"
#include "planner/sim/decider.h"

namespace mplan::e2e {

struct Compiled {
  Plan plan;
  std::string dir;     // the program's folder (train.cpp, CMakeLists.txt, build/)
  std::string error;   // non-empty: planning or codegen failed
};

// The budgets of the tests, from the model's own bounds (each asserted by the test):
//   unlimited  1 GiB: one round, no copies;
//   sub_batch  resident + a quarter-batch's largest task need x 2: the whole
//              batch does not fit, so the planner splits it;
//   offload    resident + the largest task need at the whole batch, sub-batch
//              fixed to the batch: the tasks fit one by one but not all their
//              outputs, so blocks are offloaded.
enum class Budget { unlimited, sub_batch, offload };
const char* budget_name(Budget budget);

// Plans `model_path` (a file under examples/models, or any path) at `budget`
// with the analytic K40 cost model, as `mplan compile` does (the model with
// and without its memory-saving variants, the faster kept; the offload
// budget plans the model with its variants where any pays), and writes the
// program to a fresh folder under the test binary dir named `tag`.
Compiled compile_model(const std::string& model_path, Budget budget, const std::string& tag,
                       codegen::Target target = codegen::Target::cpu);
// The same with a Model built in code (for hostile layer names).
// `sixteen_bit_kernels_on_cpu`: codegen::CodegenOptions's.
Compiled compile_model(const Model& model, Budget budget, const std::string& tag,
                       codegen::Target target = codegen::Target::cpu, bool sixteen_bit_kernels_on_cpu = false);

// Writes the program of an already made `plan` of `model` (any policy's,
// planner/policy.h) to the folder named `tag`, as compile_model does; with
// the schedules of `rank_plans`, the plans of ranks that do not run `plan`
// (codegen/codegen.h).
Compiled write_plan_program(const Model& model, Plan plan, const std::string& tag,
                            codegen::Target target = codegen::Target::cpu, std::vector<Plan> rank_plans = {},
                            bool sixteen_bit_kernels_on_cpu = false);

// Builds a written program, trains it `steps` steps from `seed` and returns
// the weights it saved; empty (with the test failed) where a step fails.
std::map<std::string, std::vector<float>> build_and_train(const Compiled& compiled, int steps, int seed);

// A plan of one round (the whole batch) in `arena_bytes` that drops every
// block it may right after its last forward use and recomputes it when the
// backward pass reads it (mplan's decider otherwise), with the header filled
// in; its recompute_steps say which steps recompute. For the tests that
// every recomputation computes the same values.
PlanResult drop_everything_plan(const Model& model, const CostModel& cost, int64_t arena_bytes = int64_t{1} << 30);

// A plan of one round (the whole batch) in `arena_bytes` made by `decider`
// on the iteration simulator, with the header filled in.
PlanResult one_round_plan(const Model& model, const CostModel& cost, Decider& decider, int64_t arena_bytes);

// Configures and builds dir/build with cmake against a prebuilt runtime
// library (default: this build's CPU runtime). Returns "" on success, else
// the tail of the log.
std::string build_program(const std::string& dir, const std::string& runtime_library = "");

// Whether this machine has an NVIDIA GPU (a CUDA program can run).
bool gpu_present();

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
RunResult run_command(const std::string& command);
// Runs dir/build/train with `args`.
RunResult run_program(const std::string& dir, const std::string& args);

// Every <name>.npy under dir: name -> floats (int32 files are skipped).
std::map<std::string, std::vector<float>> read_weights(const std::string& dir);

// max over tensors of |a - b|_inf / max(|b|_inf, 1e-12); names must match.
double max_relative_difference(const std::map<std::string, std::vector<float>>& a,
                               const std::map<std::string, std::vector<float>>& b, std::string* worst);

// Whether /usr/bin/python3 can import torch.
bool have_torch();

std::string source_dir();   // MPLAN_SOURCE_DIR
std::string work_dir(const std::string& tag);  // a fresh folder for one test

}  // namespace mplan::e2e
