#pragma once
// Workspace Division (mu-cuDNN §III-C): one workspace pool of W bytes for the
// whole network, divided among its kernels by a 0-1 integer linear program
// (Eq. 1-4), solved with GLPK (glp_intopt with its presolver):
//
//   minimise   Σ_k Σ_c T_k(c) · x_kc
//   subject to Σ_k Σ_c W_k(c) · x_kc <= W      (row "workspace")
//              Σ_c x_kc = 1   for each kernel k (row "kernel[k]")
//              x_kc ∈ {0, 1}                    (column "x[k][c]")
//
// over each kernel's desirable configurations (desirable_set.h). Each kernel
// has its own variables, even where two kernels have the same table.

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/error.h"
#include "planner/microbatch/configuration.h"

namespace mplan::microbatch {

// One kernel of the network and the configurations it may choose from
// (normally its desirable set; any list works).
struct WdKernel {
  std::string name;                          // "conv2.fwd"
  std::vector<Configuration> configurations;
};

struct WdOptions {
  int64_t total_workspace_bytes = 0;  // W: the pool shared by all kernels
  bool verbose = false;               // let GLPK print to the terminal
};

struct WdSolution {
  std::vector<int> chosen;            // per kernel: index into its configurations
  double total_time_ms = 0;           // Σ of the chosen configurations' times
  int64_t total_workspace_bytes = 0;  // Σ of their workspaces, <= W
  // Size of the ILP GLPK solved (configurations that alone exceed W are left
  // out) and how long glp_intopt took.
  int binary_variables = 0;
  int rows = 0;
  double solve_ms = 0;
};

// Solves the WD problem. An Error when a kernel has no configuration, or when
// W is smaller than the least total workspace (the sum of each kernel's
// leanest configuration), which the message gives; or when GLPK fails.
Result<WdSolution> optimize_wd(const std::vector<WdKernel>& kernels, const WdOptions& options);

// Writes the WD problem in CPLEX LP format (glp_write_lp) to `path`, through
// a temporary file renamed into place. GLPK's LP writer spells the names'
// brackets as parentheses: "kernel(conv2.fwd)", "x(conv2.fwd)(3)".
Status dump_wd_lp(const std::vector<WdKernel>& kernels, int64_t total_workspace_bytes,
                  const std::string& path);

}  // namespace mplan::microbatch
