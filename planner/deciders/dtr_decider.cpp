// Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021) as a
// baseline in the same simulator: no plan ahead, no copies. Every output the
// backward pass reads again may be evicted; when an allocation finds no
// room, the evictable tensor of least h = cost / (size x staleness) leaves
// the device, again and again until the allocation fits, and an evicted
// tensor is recomputed (with what it needs) when a task reads it (DTR §3).
// The cost is the tensor's own recomputation time (not its evicted
// neighbourhood's), the staleness counted in tensor accesses since its last
// one. The whole batch in one round; each step the fastest algorithm whose
// workspace fits.

#include <limits>
#include <vector>

#include "planner/deciders/deciders.h"

namespace mplan {
namespace {

class DtrDecider final : public Decider {
 public:
  bool may_drop(const IterationSim&, BlockId) override { return true; }

  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& request) override {
    while (!sim.memory().fits(request.bytes)) {
      if (sim.lru().empty()) return std::nullopt;
      const int64_t now = sim.lru().rbegin()->first + 1;
      int32_t victim = -1;
      double least = std::numeric_limits<double>::infinity();
      for (const auto& [stamp, inst] : sim.lru()) {
        if (sim.locked(inst) || !sim.droppable(inst)) continue;
        const double h = sim.recompute_ms(inst) /
                         (static_cast<double>(sim.instance_bytes(inst)) * static_cast<double>(now - stamp));
        if (h < least) {
          least = h;
          victim = inst;
        }
      }
      if (victim < 0) return std::nullopt;
      sim.drop(victim);
    }
    return IterationSim::kBestFit;
  }

  size_t choose_option(IterationSim& sim, int32_t, int32_t, const std::vector<TaskOption>& options) override {
    return fastest_fitting_option(sim, options);
  }
};

}  // namespace

std::unique_ptr<Decider> make_dtr_decider() { return std::make_unique<DtrDecider>(); }

}  // namespace mplan
