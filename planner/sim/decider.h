#pragma once
// The decisions of a scheduling policy over the iteration simulator
// (planner/sim/iteration_sim.h), as XLA's HeapSimulator takes a HeapAlgorithm:
// the simulator owns the state and the primitives, a Decider answers the
// questions. Every hook but make_room and choose_option has a do-nothing
// default. The deciders of the policies are in planner/deciders/deciders.h.
//
// Order of the calls for the task at position k of round r:
//
//   before_task        prefetches and synchronisation decided per layer (vDNN, SuperNeurons)
//   (the simulator makes the task's inputs present -- loading or recomputing
//    them -- and reserves its outputs; each failed allocation asks make_room)
//   choose_option      which option (algorithm, micro-batches) the task runs with
//   (the simulator reserves its workspace, asking make_room if needed; when
//    anything fails it cancels the attempt, defragments if the decider says
//    so and tries once more, else the plan is infeasible)
//   before_issue       moDNN Algorithm 1 lines 15-27 (prefetch for later tasks); vDNN's offloads; mplan's loads ahead
//   (the simulator issues the task's compute step)
//   after_task         early offloads, drops, releases
//   (the simulator frees what no later task needs)

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/sim/iteration_sim.h"

namespace mplan {

class Decider {
 public:
  virtual ~Decider() = default;

  // Once, before the first round.
  virtual void start(IterationSim& /*sim*/) {}
  // Before the first task of each round.
  virtual void start_round(IterationSim& /*sim*/, int32_t /*round*/) {}

  // Whether block b, in the current round, may be dropped after it is made
  // and recomputed when needed (asked once per block per round, only for
  // blocks the simulator can recompute: outputs of FP tasks with a
  // recompute signature that are read again in the backward pass, a
  // convolution's only in the undivided workspace mode). The
  // inputs of its recomputation then live until its last use.
  virtual bool may_drop(const IterationSim& /*sim*/, BlockId /*b*/) { return false; }

  virtual void before_task(IterationSim& /*sim*/, int32_t /*r*/, int32_t /*k*/) {}

  // An allocation of request.bytes found no free range: evict, offload or
  // drop what the policy allows and return the offset where it now fits, or
  // nothing (the allocation fails).
  virtual std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& request) = 0;

  // The index in `options` (fastest first) the task at (r, k) runs with, or
  // options.size() when none can run.
  virtual size_t choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& options) = 0;
  // The Eq. 5 gain of the last choice (TaskChoice::gain_ms; 0 when there was no choice).
  virtual double last_gain_ms() const { return 0; }

  // Whether a task whose preparation failed is retried after evicting every
  // block (moDNN §IV-B.1 defragmentation).
  virtual bool defragment_on_failure() const { return false; }
  // Whether that defragmentation first evicts every block but the task's
  // own inputs, and the rest only if the task still fails.
  virtual bool defragment_around_task() const { return false; }

  virtual void before_issue(IterationSim& /*sim*/, int32_t /*r*/, int32_t /*k*/, double /*task_ms*/) {}
  virtual void after_task(IterationSim& /*sim*/, int32_t /*r*/, int32_t /*k*/) {}
};

}  // namespace mplan
