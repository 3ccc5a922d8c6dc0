#pragma once
// The scheduling policies side by side (docs/planner.md): the same simulator
// runs mplan's own search and the papers' policies as baselines. Each policy is a decider
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
//   checkpoint    Chen et al. 2016 §4, as torch.utils.checkpoint users write
//                 it: the whole batch, the output of every k-th layer kept
//                 and the rest recomputed in the backward pass, no copies;
//                 the best k
//   dtr           Kirisame et al. 2021: the whole batch, every output
//                 evictable, the least cost / (size x staleness) evicted
//                 when an allocation fails and recomputed on demand; no copies
//   checkmate     Jain et al. 2020 §4: the whole batch, the recomputation
//                 schedule its MILP proves optimal (GLPK, within a time
//                 limit, graphs of up to 120 tasks); no copies
//   modnn         moDNN Algorithm 1 as published: one copy stream, the Eq. 3
//                 sub-batch, offloading only (no recomputation, no early offloads)
//   mplan         mplan's own plan (planner/planner.h plan_iteration): its search over
//                 sub-batches, placements and its decider's levers
//                 (recomputation, early offloads, prefetching); never a
//                 baseline's plan

#include <string>
#include <vector>

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
  checkpoint,
  dtr,
  checkmate,
  modnn,
  mplan,
};

const char* policy_name(PolicyKind kind);  // "ideal", "vdnn-all-m", ..., "mplan"
// Inverse of policy_name; false if the name is unknown.
bool parse_policy(const std::string& name, PolicyKind* kind);
// Every policy, in the order above.
std::vector<PolicyKind> all_policies();
// vDNN's policies (vdnn-all-*, vdnn-conv-*, vdnn-dyn, vdnn+): those that
// multi-GPU vDNN's staggering applies to (docs/multi-gpu.md).
bool is_vdnn_policy(PolicyKind kind);
// The baselines mplan is compared with (every policy but ideal and mplan).
std::vector<PolicyKind> baseline_policies();

}  // namespace mplan
