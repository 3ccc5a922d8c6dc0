#pragma once
// The deciders of the scheduling policies (planner/sim/decider.h): moDNN's
// Algorithm 1 -- with mplan's own levers on top -- vDNN's static and dynamic
// rules, SuperNeurons' and the ideal's. planner/plan_search.h runs them over
// the iteration simulator; planner/policy.h names them.

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/checkmate_milp.h"
#include "planner/sim/decider.h"

namespace mplan {

// What the search's refinement fixed for one block (ModnnRules::block_choices).
enum class BlockChoice : uint8_t {
  rules,    // the rules decide, as for any block
  drop,     // freed right after its last forward use, recomputed when next needed
  offload,  // copied to the host and freed right after its last forward use
};

// moDNN Algorithm 1 (moDNN §IV-B) and mplan's additions.
struct ModnnRules {
  // Eq. 5: conv tasks choose the option of best gain; false: the leanest.
  bool select_algorithms = true;
  // Lines 15-27: prefetch for later tasks when Eq. 4 says it must start now;
  // false: offloaded blocks are loaded when their task needs them (on demand).
  bool prefetch = true;
  // How far ahead (tasks) line 15's loop looks, and how far the re-fetch cost
  // of a victim reaches (planner/deciders/offload_scheme.h).
  int lookahead_tasks = 64;
  // A victim needed within the lookahead costs its re-fetch (the prefetch
  // thrash fix; planner/deciders/offload_scheme.h).
  bool refetch_cost = true;
  // Eq. 5's T_off counts the re-fetch cost of the victims too (with
  // refetch_cost); false: the delay alone, as published. The re-fetch cost
  // keeps eviction from thrashing, but in Eq. 5 it can make a fast algorithm
  // look dearer than it is (cifar_small at 3 MiB; docs/planner.md), so the
  // plan search tries both.
  bool eq5_refetch = true;

  // ---- mplan's levers (off: moDNN as published) ----
  // Recomputation (SuperNeurons §3.4, chosen by cost): outputs of cheap
  // layers (no algorithm choice: ReLU, batchnorm, pooling, LRN, dropout, add,
  // concat, ...) whose recomputation's inputs live until they are needed
  // anyway may be dropped when room is needed; a dropped block costs its
  // recomputation, an offloaded one its copies.
  bool recompute = false;
  // With recompute: convolutions too (Checkmate and MONeT recompute any
  // layer): a conv output may be dropped and rerun with its first run's
  // algorithm, where the offload it saves would hold the compute stream up
  // for longer than the conv takes. Only in the undivided workspace mode
  // (IterationSim::algorithms_recomputable).
  bool recompute_convolutions = false;
  // Early offload (vDNN §III-B's overlap, decided by need): when the round's
  // liveness peak exceeds the arena, the blocks made first in the forward pass
  // and needed again only in the backward pass are copied to the host right
  // after their last forward use, while the compute stream goes on, until
  // their bytes cover the excess; evicting them later costs nothing.
  bool early_offload = false;
  // How much more than the excess to copy early, in multiples of the largest task's need.
  double early_offload_margin = 1.0;
  // Early drops (with recompute; Checkmate §4 and MONeT §3 keep cheap
  // outputs off the device and recompute them, decided for the whole
  // iteration rather than under pressure): when the round's liveness peak
  // exceeds the arena, a block that may be dropped is freed right after its
  // last forward use if recomputing it costs at most this many times its
  // copy to the host. 0: off (blocks are dropped only when room is needed).
  double early_drop_ratio = 0;
  // Eq. 4 with the copy queue: a later task's prefetch waits for the earlier
  // ones, so each task's urgency counts the transfers queued before it and
  // every prefetch up to the last urgent task starts now (moDNN stops at the
  // first task that need not start yet).
  bool queued_prefetch = false;
  // When a task fails on fragmentation, moDNN §IV-B.1 evicts every block and
  // tries again; mplan may first evict every block but the task's inputs
  // (they are there already: evicted, they come back over PCIe), and the
  // rest only if that does not make the room. Which is faster depends on the
  // plan, so the search tries this where its best plan defragmented.
  bool defragment_around_task = false;
  // Compaction (planner/deciders/compaction.h): where an allocation finds
  // no free range long enough, moving the blocks that split one on the
  // device competes with the offloading scheme, and the cheaper is taken
  // (the scheme's delay and later cost against the moves' delay); a load
  // ahead that finds none moves blocks where that delays it less than its
  // own copy takes.
  bool compaction = false;
  // Loads ahead into room known to be free (mplan): the arena in use at each
  // unrolled position of an earlier simulation with these rules
  // (arena_in_use_by_position). A block on the host is loaded, in the order
  // of need, as soon as the copy engine in is idle and its bytes fit beside
  // that profile from now up to its use: Eq. 4 starts a copy just in time,
  // and on-demand loads start it when the task that needs it runs, while the
  // arena may have had room for it long before (ResNet-50's backward pass at
  // a quarter of its memory waits for layer1's 392 MiB outputs with half the
  // arena free). Null: off.
  std::shared_ptr<const std::vector<int64_t>> load_ahead;
  // With load_ahead: beside the profile, room is also kept for the largest
  // block made up to the use, so that a block loaded ahead does not split
  // the range a later allocation needs (the profile counts bytes, not
  // holes). Which is faster depends on the plan, so the search tries both.
  bool load_ahead_margin = false;
  // Per block (by BlockId; empty: every block by the rules), a choice made
  // for the whole iteration, as Checkmate's and Beaumont et al.'s solvers
  // make it, by the search's refinement (planner/block_refinement.h): a
  // dropped block's recomputation keeps its inputs until its last use, as
  // any dropped block's does.
  std::shared_ptr<const std::vector<BlockChoice>> block_choices;
};
std::unique_ptr<Decider> make_modnn_decider(const ModnnRules& rules);
// The reserved arena bytes in use at each unrolled position (round r, task k
// at r * tasks + k) of a simulated plan: the most at once from the frees
// after the position before to its compute step (its inputs, outputs,
// workspace and recomputations), the wd pool's workspaces left out
// (ModnnRules::load_ahead).
std::vector<int64_t> arena_in_use_by_position(const Plan& plan, int64_t pool_offset_bytes);

// vDNN §III-C: whose input feature maps are offloaded in the forward pass.
enum class VdnnOffload { none, conv, all };
// vDNN §III-C: memory-optimal (zero workspace), performance-optimal (fastest,
// failing if its workspace does not fit), or the dynamic policy's greedy
// downgrade (the fastest whose workspace fits the memory free at the step).
enum class VdnnAlgorithms { memory_optimal, performance_optimal, greedy };
// Multi-GPU vDNN (papers/multi-gpu-vdnn.txt, §III-A Step 3): a GPU swaps
// only the layers i % x + j * x of those its policy would swap (counted in
// forward order), i its place in its PCIe switch group, x the interval; the
// GPUs of a switch then copy different layers. stride 1: every layer.
struct VdnnSwapLayers {
  int32_t stride = 1;
  int32_t offset = 0;
};
std::unique_ptr<Decider> make_vdnn_decider(VdnnOffload offload, VdnnAlgorithms algorithms,
                                           VdnnSwapLayers swap = {});

// SuperNeurons §3.2-3.5 (planner/deciders/superneurons.cpp).
std::unique_ptr<Decider> make_superneurons_decider();

// Chen et al. 2016 §4: every layer's output dropped after its last forward
// use but every segment_layers-th (the checkpoints), recomputed in the
// backward pass; no offloading (planner/deciders/checkpoint_decider.cpp).
std::unique_ptr<Decider> make_checkpoint_decider(int segment_layers);

// Kirisame et al. 2021 (DTR): evict by cost / (size x staleness) when an
// allocation fails, recompute on demand; no copies
// (planner/deciders/dtr_decider.cpp).
std::unique_ptr<Decider> make_dtr_decider();

// Checkmate §4 (Jain et al. 2020): its MILP's optimal recomputation schedule
// for budget_fraction of the arena (less the round's input data), solved in
// start() within time_limit_s (planner/checkmate_milp.h), then followed: what
// a stage does not keep is dropped and recomputed on demand; no copies
// (planner/deciders/checkmate_decider.cpp). The solver's outcome is written
// to *outcome; a schedule not found makes the plan infeasible.
std::unique_ptr<Decider> make_checkmate_decider(double budget_fraction, double time_limit_s,
                                                std::shared_ptr<RematSchedule> outcome);

// SuperNeurons §3.5: the fastest option whose workspace fits the largest
// free range of the arena, else the one of least workspace.
size_t fastest_fitting_option(const IterationSim& sim, const std::vector<TaskOption>& options);

// Unlimited memory, fastest options, no copies but the input loads.
std::unique_ptr<Decider> make_ideal_decider();

}  // namespace mplan
