#pragma once
// How conv tasks use workspace (the planner's `--workspace` option), after
// mu-cuDNN (mu-cuDNN §III):
//
//   auto        the default: undivided, then dynamic as well where some conv
//               task's fastest option does not fit the arena beside its blocks
//   undivided   one cuDNN call per task and round; moDNN Eq. 5 picks the algorithm
//   dynamic     Eq. 5 picks among each task's desirable micro-batch
//               configurations (§III-C1) as well
//   wr:LIMIT    Workspace Reuse (§III-B): every conv kernel takes the WR
//               optimum under a per-kernel limit of LIMIT bytes
//   wd:TOTAL    Workspace Division (§III-C): one pool of TOTAL bytes reserved
//               at the top of the arena for the whole iteration. mu-cuDNN's WD
//               divides the pool among the kernels (Eq. 4: the *sum* of their
//               workspaces within it) because its frameworks keep every
//               layer's workspace allocated at once. A plan runs its kernels
//               one at a time on one compute stream, so each kernel may use
//               the whole pool in turn: the exact optimum of WD's objective
//               under the true constraint (each workspace within the pool) is
//               every kernel's WR optimum with the pool as its limit, and
//               that is what wd means here; each workspace lies at the
//               pool's start. (The ILP of Eq. 1-4 is kept for --dump-lp and
//               for comparison: its division is never faster.)
//   wd:auto     wd with the pool size whose plan simulates fastest
//
// A kernel here is a conv task at one sub-batch size (rounds of equal size
// share it); micro-batch sizes follow the powerOfTwo policy (§III-D).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "planner/microbatch/configuration.h"
#include "planner/microbatch/wd_optimizer.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

enum class WorkspaceUse { automatic, undivided, dynamic, wr, wd, wd_auto };

struct WorkspaceMode {
  WorkspaceUse use = WorkspaceUse::automatic;
  int64_t bytes = 0;  // wr: the per-kernel limit; wd: the pool; else 0
};

// Parses "auto", "undivided", "dynamic", "wr:64MiB", "wd:1GiB", "wd:auto". Errors name
// the flag and the text: "--workspace 'wd:abc': expected a size like 512MiB".
Result<WorkspaceMode> parse_workspace_mode(const std::string& text);

// "auto", "undivided", "dynamic", "wr:64.0 MiB", "wd:1.00 GiB", "wd:auto".
std::string workspace_mode_name(const WorkspaceMode& mode);

// The fixed configuration of each conv kernel: (task, sub-batch) -> configuration.
using KernelConfigurations = std::map<std::pair<TaskId, int64_t>, microbatch::Configuration>;

// The distinct round sizes of `sub_batches`, ascending.
std::vector<int64_t> distinct_sub_batches(const std::vector<int64_t>& sub_batches);

// WR (§III-B) for every conv task at every round size, under a per-kernel
// limit. An Error names the kernel and the least workspace it needs.
Result<KernelConfigurations> wr_configurations(const Tdfg& tdfg, const CostModel& cost,
                                               const std::vector<int64_t>& sub_batches,
                                               int64_t limit_bytes);

// The WD problem of an iteration: one kernel per conv task and round size,
// with its desirable configurations (§III-C1, no limit: optimize_wd leaves
// out those larger than the pool).
struct WdProblem {
  std::vector<microbatch::WdKernel> kernels;     // "conv2.fwd", "conv2.fwd@32" for a second size
  std::vector<std::pair<TaskId, int64_t>> keys;  // per kernel: (task, sub-batch)
};
WdProblem wd_problem(const Tdfg& tdfg, const CostModel& cost, const std::vector<int64_t>& sub_batches);

// Solves `problem` for a pool of `pool_bytes` (Eq. 1-4, GLPK). An Error when
// the pool is smaller than the least total workspace (the message gives it).
Result<KernelConfigurations> wd_configurations(const WdProblem& problem, int64_t pool_bytes);

// Σ over the kernels of their fastest configuration's workspace: the pool at
// which mu-cuDNN's WD gives every kernel its WR optimum without limit.
int64_t fastest_total_workspace_bytes(const WdProblem& problem);
// The largest fastest configuration's workspace over the kernels: the pool
// at which every kernel, run one at a time, takes its fastest configuration.
int64_t largest_fastest_workspace_bytes(const WdProblem& problem);

}  // namespace mplan
