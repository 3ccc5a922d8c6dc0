#pragma once
// The planner's entry point (docs/design.md, Planner): the plan of one
// training iteration under a memory budget, by mplan's own search or by one of
// the papers' policies (planner/policy.h). mplan's plan search
// (planner/plan_search.h) simulates candidate plans -- sub-batch sizes, conv
// workspace use, placements and the levers of mplan's decider (moDNN's
// Algorithm 1 with recomputation, early offloads and the prefetch-thrash fix,
// planner/deciders/deciders.h) -- on the iteration simulator
// (planner/sim/iteration_sim.h) and keeps the fastest. docs/planner.md
// explains the whole for a newcomer.

#include <cstdint>

#include "core/error.h"
#include "planner/plan.h"
#include "planner/plan_result.h"
#include "planner/policy.h"
#include "planner/workspace_mode.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct PlanOptions {
  // Who plans: mplan's own search (the default) or one of the papers'
  // policies. The options below the batch are mplan's and moDNN's: moDNN as
  // published fills in its own choices (one copy stream, the Eq. 3
  // sub-batch, no recomputation, no early offloads) where they are left at
  // their defaults; the layer-wise policies follow their papers and ignore them.
  PolicyKind policy = PolicyKind::mplan;
  // Device memory the program may use, everything included; required (> 0).
  int64_t budget_bytes = 0;
  // The mini-batch B; 0: the TDFG's batch (the model's).
  int64_t batch = 0;
  // 1: one copy stream shared by both directions (moDNN's StrmD); 2: one per
  // direction (current GPUs); 0: what the cost model's device has.
  int copy_engines = 0;
  // Fixed sub-batch size b (1..B); 0: the search chooses.
  int64_t sub_batch = 0;
  // Stop simulating a candidate once it cannot beat the best so far (true;
  // the same winner, faster), or simulate every candidate fully (false).
  bool screen_sub_batches = true;
  // Select conv algorithms by Eq. 5; false: always the leanest option.
  bool select_algorithms = true;
  // Prefetch ahead for future tasks (Algorithm 1 lines 15-27); false: load
  // offloaded inputs only when their task needs them (on demand). With it the
  // search also simulates on-demand loading and keeps the faster.
  bool prefetch = true;
  // How far ahead (tasks) line 15's loop looks at most.
  int prefetch_lookahead_tasks = 64;
  // Placement: blocks of at least a 1/large_block_divisor of the arena may
  // stack from its top and the rest from its bottom, so that holes left by
  // small blocks do not split the room large ones need; the search keeps
  // that placement where it is strictly faster than plain best fit. 0: best fit only.
  int large_block_divisor = 16;
  // Where the best plan of that placement still defragmented, the search is
  // made again stacking only blocks of at least 1/coarse_large_block_divisor
  // of the arena, and the faster kept (planner/mplan_search.cpp,
  // search_placements). 0: not.
  int coarse_large_block_divisor = 4;
  // mplan's levers (ModnnRules in planner/deciders/deciders.h): drop and
  // recompute cheap blocks where that costs less than offloading them, and
  // copy long-lived blocks to the host early when the round does not fit.
  bool recompute = true;
  // With recompute: convolutions may be recomputed too (with their first
  // run's algorithm; the undivided workspace mode only).
  bool recompute_convolutions = true;
  bool early_offload = true;
  // With recompute: the search also tries early drops (ModnnRules::early_drop_ratio).
  bool early_drops = true;
  // The search refines its best plan one block at a time: a large block
  // dropped, or offloaded, right after its last forward use, kept where the
  // simulation is faster (planner/mplan_search.cpp).
  bool refine_blocks = true;
  // The refinement also starts from the best plan's rounds without the
  // recomputation rules, and, where the best plan splits a batch that may run
  // whole, from one round (planner/mplan_search.cpp, refine_blocks).
  bool refine_other_starts = true;
  // Where a plan defragmented (moDNN §IV-B.1 evicts every block when a task
  // fails on fragmentation), the search also tries it evicting every block
  // but the task's inputs first (ModnnRules::defragment_around_task).
  bool defragment_around_task = true;
  // Where the best plan waits for copies in, the search simulates it again
  // loading each offloaded block as early as the arena its simulation left
  // free allows, and keeps the faster (ModnnRules::load_ahead).
  bool load_ahead = true;
  // Where no free range is long enough, move blocks on the device to make
  // one when that costs less than offloading (ModnnRules::compaction).
  bool compaction = true;
  // Batch normalisation: what the rounds of a model with batchnorm layers may
  // be (statistics are per round). prefer_one: one round, full-batch
  // statistics as plain training computes them, whenever a plan of one round
  // needs no offloading or recomputation, or costs at most
  // batchnorm_tolerance more than the fastest plan of several rounds; else
  // split (memory forces it, and the plan says so). one: one round whenever
  // any plan of one round fits. any: the sub-batch by simulated time alone.
  // In every mode no round is planned where a batchnorm layer would see fewer
  // than two values per channel.
  enum class BatchnormRounds { prefer_one, one, any };
  BatchnormRounds batchnorm_rounds = BatchnormRounds::prefer_one;
  double batchnorm_tolerance = 0.10;
  // Workspace use of conv tasks (planner/workspace_mode.h): automatic (the
  // default): undivided, then dynamic too where some conv task's fastest
  // option does not fit the arena beside its blocks; undivided (one cuDNN call per
  // task and round); dynamic: each conv task also chooses
  // among its desirable micro-batch configurations (mu-cuDNN §III-C1,
  // powerOfTwo sizes) by the gain of Eq. 5; wr: the WR optimum under the
  // per-kernel limit workspace_bytes (§III-B); wd: a pool of workspace_bytes
  // reserved at the top of the arena, every kernel taking its WR optimum
  // under the pool as its limit (one compute stream runs one kernel at a
  // time, so that is the exact optimum of WD's objective; planner/workspace_mode.h);
  // wd_auto: wd with the pool size whose plan simulates fastest.
  // The vDNN policies on several GPUs (multi-GPU vDNN §III-A Step 3): which
  // of the layers they would swap this GPU swaps (deciders.h VdnnSwapLayers).
  int32_t vdnn_swap_stride = 1;
  int32_t vdnn_swap_offset = 0;
  using Workspace = WorkspaceUse;
  Workspace workspace = Workspace::automatic;
  int64_t workspace_bytes = 0;  // wr: per-kernel limit; wd: the pool
};

// Plans one training iteration of `tdfg` under `options`. Never fails on a
// budget that is too small or an option out of range: the result says
// infeasible and why -- a budget below the minimum (the message gives the
// minimum, in bytes and human units, and the task that sets it), a batch or
// sub-batch out of range, a batchnorm layer that would see fewer than two
// values per channel (the message gives the least budget that avoids it).
// Aborts only on broken invariants.
PlanResult plan_iteration(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options);

// The smallest budget at which `policy` is feasible: moDNN's Eq. 2 minimum when
// the policy is feasible there, else the smallest feasible point of a grid of
// `grid_points` budgets from Eq. 2's minimum to twice the ideal's need (room
// for fragmentation), refined by bisection below it to within
// `resolution_bytes` (at least 256; the returned budget is feasible). The
// feasibility of the layer-wise runtimes is not monotone in the budget
// (first-fit placement), so this is the smallest feasible budget found, which
// the grid makes unlikely to miss by more than a grid step. -1 if the policy
// is not feasible at any grid point. The ideal's own minimum is its need.
int64_t minimum_feasible_budget(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                int64_t resolution_bytes, int grid_points = 32);

// The budget the ideal plan needs: its resident region plus its arena peak.
int64_t ideal_budget_bytes(const Tdfg& tdfg, const CostModel& cost, int64_t batch);

}  // namespace mplan
