#pragma once
// The size limits of a plan (issue 12): a plan holds steps for every task of
// every round (sub-batch), so the rounds, and rounds x tasks, are bounded
// before anything is simulated. Without the bound, `--batch 2147483647`
// under a small budget asks for 10^8 rounds and exhausts memory.

#include <cstdint>

#include "frontend/error.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

// At most this many rounds (sub-batches) per iteration.
inline constexpr int64_t kMaxRounds = int64_t{1} << 16;
// At most this many (task, round) pairs: the compute steps of a plan (each
// with its allocations, frees and copies, a few hundred bytes in memory).
inline constexpr int64_t kMaxTaskRounds = int64_t{1} << 22;

// Ok if running `batch` samples as sub-batches of `sub_batch` stays within the
// limits above; otherwise an Error (ErrorKind::infeasible) that says the limit.
Status check_rounds(const Tdfg& tdfg, int64_t batch, int64_t sub_batch);

// Ok if some plan of `batch` samples within `arena_bytes` can stay within the
// limits: at `fixed_sub_batch` when it is > 0, else at the largest sub-batch
// whose every task fits the arena. Also Ok when no sub-batch fits at all (the
// planner reports that itself, with the minimum budget).
Status check_plan_size(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t batch,
                       int64_t fixed_sub_batch);

}  // namespace mplan
