#pragma once
// moDNN Algorithm 1 (papers/modnn.txt §IV-B): simulates one iteration -- the
// FP/BP tasks once per round (sub-batch), then the update once -- on a compute
// stream and copy streams, placing every block in the arena with the memory
// manager; on a failed allocation it offloads the cheapest contiguous set of
// blocks (§IV-B.1), defragments when no such set exists, prefetches for future
// tasks by Eq. 4, chooses conv algorithms by the gain of Eq. 5, and frees
// every block after its last use.

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/plan.h"
#include "planner/workspace_mode.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct ScheduleOptions {
  std::vector<int64_t> sub_batches;  // samples per round, e.g. {48, 48, 32}
  int64_t arena_bytes = 0;
  int copy_engines = 2;              // 1 or 2
  bool select_algorithms = true;     // Eq. 5; false: leanest option everywhere
  bool prefetch = true;              // Algorithm 1 lines 15-27; false: load on demand
  int prefetch_lookahead_tasks = 64;
  // Blocks of at least arena_bytes / large_block_divisor stack from the top
  // of the arena, the rest from its bottom (MemoryManager::place_large_at_top);
  // 0: plain best fit.
  int large_block_divisor = 16;
  // mu-cuDNN "dynamic" workspace use (papers/mu-cudnn-microbatching.txt §III):
  // each conv task also chooses among its desirable micro-batch configurations
  // (powerOfTwo policy) by moDNN's gain (Eq. 5); false: undivided only.
  bool micro_batch_dynamic = false;
  // wr and wd (planner/workspace_mode.h): the configuration of each conv
  // kernel, fixed beforehand; such a task has this one option.
  KernelConfigurations fixed_configurations;
  // wd: a pool of this many bytes is reserved at the top of the arena for the
  // whole iteration, [arena_bytes - align_up(pool), arena_bytes); every conv
  // task with a fixed configuration puts its workspace at the pool's start
  // (tasks run one at a time on the compute stream). Other buffers use the
  // rest of the arena. 0: no pool.
  int64_t workspace_pool_bytes = 0;
  // > 0: schedule_iteration_within gives up as soon as the compute stream
  // passes this time (the plan could only end later); the planner uses it to
  // drop sub-batch candidates early.
  double abandon_after_ms = 0;
};

// Schedules the iteration. Fills choices, buffers (resident ones first, at
// offsets in the resident region), host slots, steps, event_count and the
// summary's simulated_ms, peak and fragmentation figures, copy counts and
// stall; the caller fills the header and the remaining summary fields.
// Aborts (MPLAN_CHECK) if some task cannot fit the arena even alone: the
// caller checks the sub-batch against the arena first (planner/sub_batch.h).
Plan schedule_iteration(const Tdfg& tdfg, const CostModel& cost, const ScheduleOptions& options);
// The same, or nothing when options.abandon_after_ms > 0 and the compute
// stream passed it.
std::optional<Plan> schedule_iteration_within(const Tdfg& tdfg, const CostModel& cost,
                                              const ScheduleOptions& options);

}  // namespace mplan
