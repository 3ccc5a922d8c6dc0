// The algorithm choice of the baselines that take what fits now
// (SuperNeurons §3.5; cudnn.benchmark under a caching allocator).

#include "planner/deciders/deciders.h"

namespace mplan {

size_t fastest_fitting_option(const IterationSim& sim, const std::vector<TaskOption>& options) {
  const int64_t largest_free = sim.memory().largest_free_bytes();
  size_t lean = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i].workspace_bytes == 0 || align_up(options[i].workspace_bytes) <= largest_free) return i;
    if (options[i].workspace_bytes < options[lean].workspace_bytes) lean = i;
  }
  return lean;
}

}  // namespace mplan
