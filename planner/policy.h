#pragma once
// Scheduling policies side by side (DESIGN.md, Planner: "the same simulator
// also runs the papers' own policies as baselines"). Each policy is a
// strategy that produces a Plan of the same form, which the verifier checks:
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
//                 recomputation, per-step fastest algorithm that fits (§3.2-3.5)
//   modnn         moDNN Algorithm 1 as published: one copy stream, the Eq. 3 sub-batch
//   mplan         our default: moDNN's scheduler over sub-batch candidates with
//                 the device's copy engines (planner/planner.h); where one of
//                 vDNN's configurations (static, dyn, or over moDNN's sub-batch
//                 candidates) or SuperNeurons' simulates faster, that plan
//                 instead (the note says which)
//
// The first group runs on the layer-wise simulator (planner/policies/layer_sim.h),
// modnn and mplan on moDNN's scheduler (planner/scheduler.h); both use the
// same memory manager and stream model.

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

struct PolicyOptions {
  int64_t budget_bytes = 0;  // required (> 0)
  int64_t batch = 0;         // 0: the model's batch
  // moDNN's scheduler's options for modnn and mplan (`mplan compile`'s
  // --sub-batch, --copy-engines, --no-prefetch, --lean-algorithms,
  // --workspace); its budget_bytes and batch are ignored (the two above
  // apply). modnn's own choices (one copy stream, the Eq. 3 sub-batch) fill
  // only what is left at 0 here. mplan's portfolio tries the layer-wise
  // alternatives (vDNN's, SuperNeurons') only when none of these options
  // differs from its default: those runtimes have no such knobs, so a plan
  // of theirs would silently ignore what the user asked for.
  PlanOptions scheduler;
};

// Whether `scheduler` differs from a default PlanOptions in anything but
// the budget and batch (see PolicyOptions::scheduler).
bool has_scheduler_overrides(const PlanOptions& scheduler);

struct PolicyOutcome {
  PolicyKind kind = PolicyKind::ideal;
  // The plan fits the budget. The ideal is always planned (with its own,
  // unlimited, budget); feasible says whether that fits the budget asked for.
  bool feasible = false;
  // Infeasible: why (the task and bytes that did not fit). Feasible: what the
  // policy chose when it has choices (vdnn-dyn's pass, vdnn+'s sub-batch).
  std::string note;
  Plan plan;                   // header filled; empty when infeasible (except ideal)
  // The simulated iteration time; for the ideal, the sum of the fastest
  // options' times (moDNN §V: "accumulating all individual tasks' execution times").
  double simulated_ms = 0;
  int32_t recomputed_tasks = 0;
  std::vector<int32_t> recompute_steps;     // indices of the recomputing compute steps
  std::vector<BlockId> offloaded_blocks;    // layer-wise policies: blocks offloaded in round 0
  double planner_ms = 0;                    // wall time of this policy's planning
  // modnn and mplan when moDNN's scheduler made the plan: what the wd
  // workspace modes decided (for `mplan compile --dump-lp`); empty otherwise.
  WorkspaceReport workspace_report;
};

// Plans one iteration with `kind`. Never fails on a too-small budget: the
// outcome says infeasible and why. Aborts only on broken invariants.
PolicyOutcome run_policy(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, const PolicyOptions& options);

// The smallest budget at which `kind` is feasible, found by bisection between
// moDNN's minimum (Eq. 2, below which nothing fits) and twice the ideal's
// need (room for fragmentation), to within `resolution_bytes` (rounded up:
// the returned budget is feasible); -1 if the policy is not feasible even
// there. The ideal's own minimum is its need.
int64_t minimum_feasible_budget(PolicyKind kind, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes);

// The budget the ideal plan needs: its resident region plus its arena peak.
int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch);

}  // namespace mplan
