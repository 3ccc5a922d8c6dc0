#pragma once
// Codegen (docs/design.md, "Generated program and runtime"): turns a Plan into the
// source tree of a training program -- train.cpp (the model's constants, the
// buffer tables and the schedule, in the style of llm.c; the fixed code is
// runtime/program.cpp) and a CMakeLists.txt that builds it against the runtime
// of its target backend. Pure: files come back as strings; write_program puts
// them on disk.

#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"
#include "codegen/target.h"
#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan::codegen {

struct CodegenOptions {
  // What generated it and from what, for the header comment.
  std::string mplan_version = "0.1.0";
  std::string model_file;   // shown in the header; "" -> Model::source_file
  // The runtime sources the generated CMakeLists builds with
  // add_subdirectory when MPLAN_RUNTIME_LIBRARY is not given: the default of
  // the MPLAN_RUNTIME_DIR cache variable (usually <repo>/runtime).
  std::string runtime_dir;
  // The backend the program is built for: the CPU runtime (runtime/cpu) or
  // CUDA (runtime/cuda, cuDNN and cuBLAS).
  Target target = Target::cpu;
  // A 16-bit program's convolutions and linear layers call their 16-bit
  // kernels (ops/sixteen_bit_kernels.h): always on CUDA; on the CPU,
  // whose program otherwise brackets the float kernels with casts, where
  // asked (the same values, bit for bit: the tests compare the two).
  bool sixteen_bit_kernels_on_cpu = false;
};

struct GeneratedFile {
  std::string path;  // relative to the output directory: "train.cpp"
  std::string text;
};

struct GeneratedProgram {
  std::vector<GeneratedFile> files;
  // What the program does otherwise than planned, also written in its header:
  // a cost model that is not the target's, algorithms the target runs instead
  // of the planned ones (and why). `mplan compile` prints them.
  std::vector<std::string> warnings;
  const GeneratedFile* find(const std::string& path) const;
};

// The evaluation pass beside the training step (docs/generated-program.md,
// "Evaluation"): its TDFG (TdfgOptions::evaluation) and plan, whose resident
// buffers are the training plan's.
struct EvaluationSchedule {
  const Tdfg* tdfg = nullptr;
  const Plan* plan = nullptr;
};

// The program for `plan` (made for `tdfg`, the TDFG of `model` at one
// sub-batch), with the evaluation's schedule where one is given (`train
// --val`, `--eval`). Errors: a plan that does not belong to the model (digest
// or task count differ), that uses a step the program cannot express, or an
// evaluation plan whose resident buffers are not the training plan's.
//
// A plan of several ranks (plan.data_parallel) whose ranks do not all run
// it: `rank_plans` are the other ranks' plans (plan-rank-<r>.json, each with
// its data_parallel.rank), each emitted as a schedule of its own in
// `namespace rank_<r>`, which the program runs on the ranks plan_of_rank
// names (docs/multi-gpu.md). They must place the resident buffers as `plan` does.
Result<GeneratedProgram> emit_program(const Model& model, const Tdfg& tdfg, const Plan& plan,
                                      const CodegenOptions& options,
                                      const EvaluationSchedule* evaluation = nullptr,
                                      const std::vector<const Plan*>& rank_plans = {});

// Writes every file under `dir` (created if missing), each atomically (a
// temporary file renamed over the target).
Status write_program(const GeneratedProgram& program, const std::string& dir);

// The text of the generated CMakeLists.txt for options.target (emit_cmake.cpp);
// a program of several ranks also links MPI (and NCCL on CUDA).
std::string emit_cmake(const std::string& model_name, const CodegenOptions& options, int32_t ranks = 1);

// The default runtime directory of this build of mplan (<repo>/runtime).
std::string default_runtime_dir();

}  // namespace mplan::codegen
