#pragma once
// The size limits of a plan: a plan holds steps for every task of
// every round (sub-batch), so the rounds, and rounds x tasks, are bounded
// before anything is simulated. Without the bound, `--batch 2147483647`
// under a small budget asks for 10^8 rounds and exhausts memory.

#include <cstdint>

#include "core/error.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

// At most this many rounds (sub-batches) per iteration. Planning time grows
// faster than linearly in the rounds (measured, `mplan compile` of a 6-layer
// model at sub-batch 1: 512 rounds 0.9 s, 2048 rounds 4.5 s, 8192 rounds
// 47 s, on a loaded 2-core machine).
inline constexpr int64_t kMaxRounds = 4096;
// At most this many (task, round) pairs: the compute steps of a plan. The
// largest plan of the example models, ResNet-1001 (batch 64) at moDNN's Eq. 2
// minimum, is 64 rounds of one sample, 555,776 pairs: `mplan compile` makes
// it in 68 s with a peak of 4.3 GB (about 7.8 KB per pair: the steps,
// buffers and events, the verifier's replay, the JSON and C++ text). The
// limit admits it with 8% to spare and keeps any plan within about 5 GB.
inline constexpr int64_t kMaxTaskRounds = 600'000;

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
