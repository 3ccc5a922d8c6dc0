#pragma once
// Scheduling policies side by side (DESIGN.md, Planner: "the same simulator
// also runs the papers' own policies as baselines"). Each policy is a decider
// over the one iteration simulator (planner/sim/iteration_sim.h,
// planner/deciders/deciders.h) with the search its paper allows
// (planner/plan_search.h); every plan has the same form and the verifier
// checks it the same way. All of them see the same TDFG, with in-place
// activations (tdfg/tdfg.h TdfgOptions), as the papers' frameworks had.
//
//   ideal         unlimited memory, fastest options, the full batch (moDNN §V:
//                 the sum of the tasks' times; the reference of every overhead)
//   vdnn-all-m    vDNN §III-C static policies: offload the input X of every
//   vdnn-all-p    layer (all) or of conv layers only (conv) during its forward
//   vdnn-conv-m   pass, prefetch by findPrefetchLayer (Fig. 10), streams
//   vdnn-conv-p   synchronised at layer boundaries; memory-optimal (m: zero
//                 workspace) or performance-optimal (p: fastest) algorithms
//   vdnn-dyn      vDNN §III-C dynamic: its profiling passes, then the greedy
//                 per-layer algorithm downgrade, each pass simulated
//   vdnn+         vdnn-dyn over moDNN's sub-batch candidates (moDNN §V-B)
//   superneurons  liveness, LRU tensor cache of conv outputs, cost-aware
//                 recomputation (batchnorm included), per-step fastest
//                 algorithm that fits (§3.2-3.5)
//   modnn         moDNN Algorithm 1 as published: one copy stream, the Eq. 3
//                 sub-batch, offloading only (no recomputation, no early offloads)
//   mplan         mplan's own plan (planner/planner.h): its search over
//                 sub-batches, placements and its decider's levers
//                 (recomputation, early offloads, prefetching); never a
//                 baseline's plan

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/planner.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

enum class PolicyKind {
  ideal,
  vdnn_all_m,
  vdnn_all_p,
  vdnn_conv_m,
  vdnn_conv_p,
  vdnn_dyn,
  vdnn_plus,
  superneurons,
  modnn,
  mplan,
};

const char* policy_name(PolicyKind kind);  // "ideal", "vdnn-all-m", ..., "mplan"
// Inverse of policy_name; false if the name is unknown.
bool parse_policy(const std::string& name, PolicyKind* kind);
// Every policy, in the order above.
std::vector<PolicyKind> all_policies();
// The baselines mplan is compared with (every policy but ideal and mplan).
std::vector<PolicyKind> baseline_policies();

struct PolicyOptions {
  int64_t budget_bytes = 0;  // required (> 0)
  int64_t batch = 0;         // 0: the model's batch
  // The planner's options for modnn and mplan (`mplan compile`'s --sub-batch,
  // --copy-engines, --no-prefetch, --lean-algorithms, --workspace, ...); its
  // budget_bytes and batch are ignored (the two above apply). modnn's own
  // choices (one copy stream, the Eq. 3 sub-batch, no recomputation, no early
  // offloads) fill only what is left at its default here. The layer-wise
  // policies follow their papers and ignore it.
  PlanOptions scheduler;
};

struct PolicyOutcome {
  PolicyKind kind = PolicyKind::ideal;
  // The plan fits the budget. The ideal is always planned (with its own,
  // unlimited, budget); feasible says whether that fits the budget asked for.
  bool feasible = false;
  // Infeasible: why (the task and bytes that did not fit). Feasible: what the
  // policy chose (sub-batch, levers, vdnn-dyn's pass).
  std::string note;
  Plan plan;                   // header filled; empty when infeasible (except ideal)
  // The simulated iteration time; for the ideal, the sum of the fastest
  // options' times (moDNN §V: "accumulating all individual tasks' execution times").
  double simulated_ms = 0;
  int32_t recomputed_tasks = 0;
  std::vector<int32_t> recompute_steps;     // indices of the recomputing compute steps
  std::vector<BlockId> offloaded_blocks;    // blocks offloaded in round 0
  double planner_ms = 0;                    // wall time of this policy's planning
  int32_t simulations = 0;                  // iterations the search simulated
  // modnn and mplan: what the wd workspace modes decided (`mplan compile --dump-lp`).
  WorkspaceReport workspace_report;
};

// Plans one iteration with `kind`. Never fails on a too-small budget: the
// outcome says infeasible and why. Aborts only on broken invariants.
PolicyOutcome run_policy(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, const PolicyOptions& options);

// The smallest budget at which `kind` is feasible: moDNN's Eq. 2 minimum when
// the policy is feasible there, else the smallest feasible point of a grid of
// `grid_points` budgets from Eq. 2's minimum to twice the ideal's need (room
// for fragmentation), refined by bisection below it to within
// `resolution_bytes` (at least 256; the returned budget is feasible). The
// feasibility of the layer-wise runtimes is not monotone in the budget
// (first-fit placement), so this is the smallest feasible budget found, which
// the grid makes unlikely to miss by more than a grid step. -1 if the policy
// is not feasible at any grid point. The ideal's own minimum is its need.
int64_t minimum_feasible_budget(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes, int grid_points = 32);

// The budget the ideal plan needs: its resident region plus its arena peak.
int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch);

}  // namespace mplan
