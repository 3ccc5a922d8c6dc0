#pragma once
// Compaction (mplan): when an allocation finds no free range long enough
// while the arena has the bytes, the blocks that split a range are moved on
// the device into free ranges elsewhere, and the range becomes one free run.
// A move copies through device memory (terabytes per second on an H200)
// where moDNN's offloading scheme (§IV-B.1, Fig. 3-4) or its
// defragmentation sends blocks over PCIe and back (about 50 GB/s each way).
//
// Candidates are windows of contiguous arena segments, each free or held by
// a block that may move: any block instance on the device that has been made
// (or is being loaded), the running task's inputs included (its compute step
// reads them where they are when it is issued); not a workspace, nor what the
// task being prepared has reserved. Every block of the window must
// find a place in the free ranges outside it (largest block first, best
// fit). Moves run on the compute stream, each after its block's writer and
// after the users of the range it goes to (plan.h's reuse rule); the
// allocation's writer then waits for the moves and for every other user of
// the window. The window that delays the writer least wins, then the one
// that moves fewest bytes, then the lowest address.

#include <cstdint>
#include <utility>
#include <vector>

#include "planner/sim/iteration_sim.h"

namespace mplan {

struct Compaction {
  bool found = false;
  int64_t begin = 0;                                // the run made free
  std::vector<std::pair<int32_t, int64_t>> moves;   // (instance, new offset), in issue order
  int64_t bytes = 0;                                // moved
  double delay_ms = 0;                              // how much later the writer can start
};

// The best compaction for `request` now; not found where no window qualifies.
Compaction find_compaction(IterationSim& sim, const RoomRequest& request);
// Carries it out (IterationSim::move per block); returns the run's begin.
int64_t apply_compaction(IterationSim& sim, const Compaction& compaction);

}  // namespace mplan
