#include "codegen/debug_poisoning.h"

#include <algorithm>

namespace mplan::codegen {

DebugPoisoning plan_debug_poisoning(const Plan& plan) {
  DebugPoisoning result;
  auto buffers_used = [](const Step& step) {
    std::vector<BufferId> used;
    if (step.kind == StepKind::compute || step.kind == StepKind::move) {
      used = step.reads;
      used.insert(used.end(), step.writes.begin(), step.writes.end());
      if (step.workspace != kNoBuffer) used.push_back(step.workspace);
    } else if (step.kind == StepKind::offload || step.kind == StepKind::prefetch) {
      used.push_back(step.buffer);
    }
    used.erase(std::remove(used.begin(), used.end(), kNoBuffer), used.end());
    return used;
  };
  std::map<BufferId, std::map<StreamKind, int32_t>> last_on_stream;
  for (const Step& step : plan.steps) {
    for (BufferId b : buffers_used(step)) last_on_stream[b][step.stream] = step.index;
    if (step.kind != StepKind::free) continue;
    auto it = last_on_stream.find(step.buffer);
    if (it == last_on_stream.end()) continue;
    int32_t last = -1;
    for (auto [stream, index] : it->second) last = std::max(last, index);
    PoisonAfter poison{step.buffer, {}};
    for (auto [stream, index] : it->second) {
      if (index == last) continue;
      const int32_t event = result.debug_event_count++;
      result.events.push_back({step.buffer, stream});
      result.records[index].push_back(event);
      poison.waits.push_back(event);
    }
    result.poisons[last].push_back(poison);
    last_on_stream.erase(it);
  }
  return result;
}

}  // namespace mplan::codegen
