#pragma once
// Where the program's --debug-poison refills dead buffers (codegen-internal).

#include <map>
#include <utility>
#include <vector>

#include "planner/plan.h"

namespace mplan::codegen {

// --debug-poison: each dead buffer is refilled with NaN on the stream of its
// last user, right after it, so a later buffer in the same range (ordered
// after the users by the plan) is never clobbered; users on other streams are
// waited for with debug events recorded after them.
struct PoisonAfter {
  BufferId buffer = kNoBuffer;
  std::vector<int32_t> waits;  // debug events of the other streams' last users
};
struct DebugPoisoning {
  std::map<int32_t, std::vector<PoisonAfter>> poisons;  // step index -> buffers last used there
  std::map<int32_t, std::vector<int32_t>> records;      // step index -> debug events recorded there
  int32_t debug_event_count = 0;
  // Per debug event: the buffer whose poisoning waits for it, and the stream it is recorded on.
  std::vector<std::pair<BufferId, StreamKind>> events;
};
DebugPoisoning plan_debug_poisoning(const Plan& plan);

}  // namespace mplan::codegen
