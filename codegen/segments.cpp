#include "codegen/segments.h"

namespace mplan::codegen {

std::vector<Segment> split_segments(const Plan& plan) {
  std::vector<Segment> segments;
  const int32_t count = static_cast<int32_t>(plan.steps.size());
  bool seen_compute = false;
  for (int32_t i = 0; i < count; ++i) {
    const Step& step = plan.steps[i];
    if (step.kind != StepKind::compute) continue;
    if (!seen_compute) {
      segments.push_back({step.round, 0, 0});  // round 0's segment starts with the plan
      seen_compute = true;
    } else if (step.round != segments.back().round) {
      segments.back().end_step = i;
      segments.push_back({step.round, i, 0});
    }
  }
  if (segments.empty()) segments.push_back({kOnceRound, 0, 0});
  segments.back().end_step = count;
  return segments;
}

}  // namespace mplan::codegen
