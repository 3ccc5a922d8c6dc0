#pragma once
// The text of one compute step of the generated program: the runtime calls
// (runtime/ops.h, runtime/conv.h) of one task of the TDFG on one sub-batch,
// with explicit pointers and sizes (llm.c style). One function per op kind.

#include <map>
#include <string>
#include <vector>

#include "frontend/error.h"
#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan::codegen {

// Everything a compute step's text depends on.
struct ComputeCall {
  const Model* model = nullptr;
  const Tdfg* tdfg = nullptr;
  const Task* task = nullptr;
  const TaskChoice* choice = nullptr;    // nullptr: no choice recorded ("default")
  int32_t round = 0;                     // kOnceRound for the update
  int64_t samples = 0;                   // samples in this round (the sub-batch)
  int64_t first_sample = 0;              // global index of the round's first sample
  // The generated Region constant of each block the task reads or writes.
  std::map<BlockId, std::string> region_of;
  std::string workspace_region;          // "" when the step has no workspace
  int64_t workspace_bytes = 0;
  // A recompute step (Step::recompute): the task re-runs with its
  // Task::recompute_reads / recompute_writes (batchnorm from its saved statistics).
  bool recompute = false;
};

// Statements (without indentation) that run inside the step's closure on the
// compute stream, each a runtime call. Error: a task the runtime cannot run.
Result<std::vector<std::string>> emit_compute_call(const ComputeCall& call);

// The CPU algorithm that runs a conv task planned with `planned` (a CPU name
// such as "gemm", or a cuDNN name from a GPU cost model) within
// `workspace_bytes`: the planned one when the CPU runtime has it and it fits,
// else the closest that fits ("direct" needs none). Exposed for tests.
std::string cpu_conv_algorithm(const std::string& planned, TaskKind kind, const Model& model,
                               LayerId layer, int64_t samples, int64_t workspace_bytes);

}  // namespace mplan::codegen
