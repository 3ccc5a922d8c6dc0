#pragma once
// moDNN's offloading scheme (moDNN §IV-B.1, Fig. 3-4): when an
// allocation fails, a run of contiguous arena segments, each free or held by
// a block that may leave the device now, long enough for the request; the
// run whose eviction delays the writer least wins.
//
// A block may leave unless the task being prepared (or, for a prefetch, any
// task up to the one prefetched for) uses it -- criterion (a) -- or it has
// not been used since it was made or prefetched -- criterion (b). Leaving
// costs, per block:
//   - already on the host: nothing now (a plain free);
//   - droppable (recomputation on): nothing now, its recomputation later;
//   - else: its copy to the host, which the writer waits for (Fig. 3).
// With `refetch_cost`, a block needed again within the lookahead also costs
// its copy back (else a victim that already has a host copy looks free even
// when the next task needs it, and prefetching thrashes).

#include <cstdint>
#include <vector>

#include "planner/sim/iteration_sim.h"

namespace mplan {

struct SchemeCosts {
  bool refetch_cost = true;          // victims needed within lookahead_tasks cost their re-fetch
  int lookahead_tasks = 64;
  bool drop_droppable = false;       // droppable victims are dropped (cost: their recomputation)
};

struct OffloadScheme {
  bool found = false;
  int64_t begin = 0;
  std::vector<int32_t> victims;      // instances, in address order
  std::vector<bool> drop;            // per victim: dropped rather than evicted
  double delay_ms = 0;               // how much later the writer can start (Fig. 3)
  double transfer_ms = 0;            // copies to the host it issues
  double future_ms = 0;              // re-fetches and recomputations it causes later
  double refetch_ms = 0;             // the re-fetches' part of future_ms
  int64_t soonest_next_use = 0;      // the earliest next use among the victims
};

// The best scheme for `request` now: least delay + future cost, then least
// transfer, then the victims needed latest, then the lowest address. One
// walk of the segment list gathers what each costs; the windows then slide
// over it, so a call is linear in the segments.
class OffloadSchemeFinder {
 public:
  explicit OffloadSchemeFinder(SchemeCosts costs) : costs_(costs) {}
  OffloadScheme find(IterationSim& sim, const RoomRequest& request);
  // Carries the scheme out (evicts and drops its victims); returns its begin.
  static int64_t apply(IterationSim& sim, const OffloadScheme& scheme);
  const SchemeCosts& costs() const { return costs_; }

 private:
  struct Segment {
    int64_t begin = 0, end = 0;
    int32_t victim = -1;             // -1: free
    bool acceptable = false;
    bool drop = false;               // dropped rather than offloaded (when drop_if_copy_stalls: and the copy stalls)
    bool drop_if_copy_stalls = false;  // a writer has algorithms: dropped only where the offload would stall
    double recompute_ms = 0;
    double users_end_ms = 0;
    double writer_end_ms = 0;
    double copy_ms = 0;
    bool needs_copy = false;
    double future_ms = 0;
    double refetch_ms = 0;
    int64_t next_use = 0;
  };
  SchemeCosts costs_;
  std::vector<Segment> scan_;
  std::vector<bool> drop_;  // per segment, in the window being priced: dropped
  // What scan_ was made for.
  int64_t scan_generation_ = -1;
  size_t scan_steps_ = 0;
  int64_t scan_horizon_ = -1, scan_pos_ = -1;
  int scan_slot_ = -1;
};

}  // namespace mplan
