#pragma once
// The plan's steps cut into segments of one round each (codegen-internal): a
// segment runs from the first compute step of its round to the step before
// the next round's first compute step (the first segment also holds what the
// plan issues before any compute: round 0's input loads; the last one is the
// update). Rounds whose segments print the same code share one function of
// the generated program and differ only in a row of its table (offsets,
// events, the first sample): the schedule is O(tasks), not O(rounds x tasks).

#include <cstdint>
#include <vector>

#include "planner/plan.h"

namespace mplan::codegen {

struct Segment {
  int32_t round = 0;         // the round of its compute steps (kOnceRound: the update)
  int32_t first_step = 0;    // [first_step, end_step) of Plan::steps
  int32_t end_step = 0;
};

std::vector<Segment> split_segments(const Plan& plan);

}  // namespace mplan::codegen
