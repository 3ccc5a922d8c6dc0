#pragma once
// Checkmate's MILP for optimal rematerialisation (Jain et al., "Checkmate:
// Breaking the Memory Wall with Optimal Tensor Rematerialization", MLSys
// 2020, §4), solved with GLPK: the `checkmate` baseline of `mplan compare`
// (planner/policy.h). Recomputation alone: no copies, the whole batch.
//
// The schedule has one stage per node, in order; stage t computes node t
// and, before it, recomputes what it needs. R[t][i] = 1: node i is
// (re)computed in stage t; S[t][i] = 1: node i's output is kept from stage
// t-1 into stage t. Node i's output is freed in stage t after its last user
// there unless it is kept into stage t+1 (FREE, §4.4). The memory after each
// node of each stage stays within the budget (U, §4.4, Eq. 4-7), and the
// objective is the time of every computation, recomputations included.
// Only the lower triangle is used (the "frontier-advancing" schedule, §4.2).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mplan {

struct RematGraph {
  // Per node, in schedule order: its time, the bytes of its output, and
  // whether it may run again (a node that may not runs only in its stage).
  std::vector<double> compute_ms;
  std::vector<double> output_bytes;
  std::vector<bool> recomputable;
  // (u, v), u < v: node v reads node u's output.
  std::vector<std::pair<int32_t, int32_t>> edges;
};

struct RematOptions {
  double budget_bytes = 0;      // what the nodes' outputs may hold at once
  double time_limit_s = 20;     // GLPK's limit; the best schedule found by then is kept
  int32_t max_nodes = 120;      // larger graphs are not attempted (O(n^2) binaries)
};

struct RematSchedule {
  bool solved = false;          // a feasible schedule was found
  bool optimal = false;         // ... and proven optimal
  std::string why;              // when not solved: the reason
  // kept[t][i]: S[t][i] (i < t). computed[t][i]: R[t][i] (i <= t).
  std::vector<std::vector<uint8_t>> kept;
  std::vector<std::vector<uint8_t>> computed;
  double total_ms = 0;          // the objective: every (re)computation's time
  double peak_bytes = 0;        // when every output is kept (no MILP solved): the most held at once
  int32_t binaries = 0;         // size of the MILP
  int32_t rows = 0;
  double solve_ms = 0;
};

// The schedule of least total time within the budget, or why there is none.
// Where keeping every output until its last user fits, that schedule is
// returned without solving (it is optimal: nothing runs twice).
RematSchedule solve_checkmate(const RematGraph& graph, const RematOptions& options);

}  // namespace mplan
