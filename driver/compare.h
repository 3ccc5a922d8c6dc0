#pragma once
// `mplan compare` as a library: every scheduling policy (planner/policy.h)
// on the same model, cost model and budget, each plan checked by the
// independent verifier. A policy that cannot fit the budget is a row that
// says so and why, never an error.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "driver/cost_source.h"
#include "driver/data_parallel_compile.h"
#include "planner/planner.h"

namespace mplan::driver {

struct CompareFlags {
  std::string model_path;
  std::string budget;
  std::string device;   // "": the default device
  std::string profile;  // a recorded profile.json instead of --device
  int64_t batch = 0;
  bool batch_given = false;
  std::string policies;  // comma-separated; empty: all
  bool min_budget = false;
  bool no_verify = false;
  bool allow_oversubscribe = false;
  std::string precision;  // "": the model's
  int32_t gpus = -1;       // --gpus; -1: not given (one GPU, or every GPU of --machine)
  std::string machine;     // --machine
};

struct CompareSettings {
  std::string model_path;
  std::optional<Precision> precision;  // replaces the model's precision and math
  CostSource cost;
  int64_t budget_bytes = 0;
  int64_t batch = 0;  // 0: the model's
  std::vector<PolicyKind> policies;
  bool min_budget = false;
  bool verify = true;
  bool allow_oversubscribe = false;
  // Several GPUs (docs/multi-gpu.md): each policy's plan of a rank's share,
  // its ranks' joint step, and for vDNN also with the paper's staggering.
  DataParallelSettings data_parallel;
  // Called before each policy is planned (the index in `policies`), for
  // progress on long comparisons (--min-budget, Checkmate's MILP).
  std::function<void(PolicyKind, size_t)> on_policy;
};

// Checks the flags that need no file; errors are of kind usage.
Result<CompareSettings> check_compare_flags(const CompareFlags& flags);

struct CompareRow {
  PlanResult planned;
  int64_t peak_bytes = 0;          // resident region + arena peak
  int violations = -1;             // -1: not verified
  std::string first_violation;
  int prefetches_freed_unread = 0;  // the verifier's warning (wasted copies); with violations >= 0
  int64_t min_budget_bytes = -2;   // -2: not asked; -1: infeasible even at twice the ideal's need
  // Several GPUs: the joint step of every rank running the policy's plan
  // (--stagger none), and the one its staggering makes (vDNN: the paper's
  // Step 3; mplan: its search); -1 where not planned.
  double joint_ms = -1;
  double staggered_ms = -1;
  std::string staggered_policy;
};

struct CompareResult {
  std::string model_name;
  Precision precision = Precision::fp32;  // the model's (docs/model-format.md, "Precision")
  std::string cost_model;  // CostModel::describe()
  int64_t budget_bytes = 0;
  int64_t batch = 0;
  size_t tasks = 0, blocks = 0;
  PlanResult ideal;
  std::vector<CompareRow> rows;
  std::vector<std::string> warnings;  // the cost model's, for stderr
  int32_t ranks = 1;          // several GPUs: `batch` is a rank's share
  std::string ranks_line;     // "ranks: 4 on ..." ("" for one GPU)
};

// Plans every policy of the settings. Errors: a bad input file, or a budget
// above the device's memory without allow_oversubscribe (usage).
Result<CompareResult> compare(const CompareSettings& settings);

}  // namespace mplan::driver
