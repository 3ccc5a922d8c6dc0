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
// over each kernel's desirable configurations (desirable_set.h).
//
// Kernels with the same configurations (the same (time, workspace) list, as
// ResNet's repeated blocks) form a class K and share its variables: one
// integer n_Kc ∈ {0..|K|} per configuration c counts how many kernels of K
// take c, with Σ_c n_Kc = |K| (row "class[first kernel]", column
// "n[first kernel][c]"); a class of one kernel keeps x_kc ∈ {0, 1}. This is
// an exact reformulation (proof in wd_optimizer.cpp) and removes the |K|!
// symmetric copies of each solution that make branch and bound slow.

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
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
  // Kernels with the same configurations share integer variables (exact);
  // false builds the paper's 0-1 ILP with one x_kc per kernel.
  bool merge_identical_kernels = true;
};

struct WdSolution {
  std::vector<int> chosen;            // per kernel: index into its configurations
  double total_time_ms = 0;           // Σ of the chosen configurations' times
  int64_t total_workspace_bytes = 0;  // Σ of their workspaces, <= W
  // Size of the ILP GLPK solved (configurations that alone exceed W are left
  // out) and how long glp_intopt took. Columns = binary_variables (classes of
  // one kernel) + integer_variables (n_Kc of classes of two or more); rows =
  // kernel_classes + 1 (the workspace row).
  int binary_variables = 0;
  int rows = 0;
  double solve_ms = 0;
  int integer_variables = 0;
  int kernel_classes = 0;
  // The paper's 0-1 ILP for the same kernels and pool: one x_kc per kernel
  // and configuration that fits W (what mu-cuDNN §IV-D counts as 562).
  int unmerged_binary_variables = 0;
};

// The classes of kernels that share variables: indices into `kernels`,
// ascending, classes in order of their first kernel. Two kernels are in one
// class when the configurations that fit `total_workspace_bytes` have the
// same times and workspaces, in the same order.
std::vector<std::vector<int>> wd_kernel_classes(const std::vector<WdKernel>& kernels,
                                                int64_t total_workspace_bytes);

// Solves the WD problem. An Error when a kernel has no configuration, or when
// W is smaller than the least total workspace (the sum of each kernel's
// leanest configuration), which the message gives; or when GLPK fails.
// Within a class, kernels in ascending index take the class's chosen
// configurations in ascending configuration index (deterministic).
Result<WdSolution> optimize_wd(const std::vector<WdKernel>& kernels, const WdOptions& options);

// Writes the WD problem in CPLEX LP format (glp_write_lp) to `path`, through
// a temporary file renamed into place. GLPK's LP writer spells the names'
// brackets as parentheses: "kernel(conv2.fwd)", "x(conv2.fwd)(3)",
// "class(res2b.branch2a.fwd)", "n(res2b.branch2a.fwd)(3)". Kernels are
// merged into classes as optimize_wd does by default.
Status dump_wd_lp(const std::vector<WdKernel>& kernels, int64_t total_workspace_bytes,
                  const std::string& path);
// The same, with the pool and merging taken from `options`.
Status dump_wd_lp(const std::vector<WdKernel>& kernels, const WdOptions& options,
                  const std::string& path);

}  // namespace mplan::microbatch
