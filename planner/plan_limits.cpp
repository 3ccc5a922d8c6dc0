#include "planner/plan_limits.h"

#include <fmt/format.h>

#include "core/bytes.h"
#include "planner/sub_batch.h"

namespace mplan {

Status check_rounds(const Tdfg& tdfg, int64_t batch, int64_t sub_batch) {
  if (batch < 1 || sub_batch < 1)
    return Error{{}, fmt::format("batch {} and sub-batch {} must be positive", batch, sub_batch),
                 ErrorKind::infeasible};
  const int64_t rounds = batch / sub_batch + (batch % sub_batch != 0 ? 1 : 0);
  const int64_t tasks = static_cast<int64_t>(tdfg.tasks.size());
  if (rounds > kMaxRounds)
    return Error{{}, fmt::format("the batch of {} as sub-batches of {} would take {} rounds; a plan has at most {} "
                                 "rounds (raise the budget or the sub-batch, or lower the batch)",
                                 batch, sub_batch, rounds, kMaxRounds),
                 ErrorKind::infeasible};
  if (rounds > kMaxTaskRounds / std::max<int64_t>(tasks, 1))
    return Error{{}, fmt::format("the batch of {} as sub-batches of {} would take {} rounds of {} tasks; a plan has "
                                 "at most {} task runs (raise the budget or the sub-batch, or lower the batch)",
                                 batch, sub_batch, rounds, tasks, kMaxTaskRounds),
                 ErrorKind::infeasible};
  return Ok{};
}

Status check_plan_size(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, int64_t batch,
                       int64_t fixed_sub_batch) {
  if (fixed_sub_batch > 0) return check_rounds(tdfg, batch, std::min(fixed_sub_batch, batch));
  if (arena_bytes <= 0) return Ok{};
  const int64_t largest = largest_feasible_sub_batch(tdfg, cost, arena_bytes, batch);
  if (largest < 1) return Ok{};
  Status status = check_rounds(tdfg, batch, largest);
  if (status) return status;
  Error e = status.error();
  e.message = fmt::format("under the arena of {} the largest sub-batch that fits is {}: {}", format_bytes(arena_bytes),
                          largest, e.message);
  return e;
}

}  // namespace mplan
