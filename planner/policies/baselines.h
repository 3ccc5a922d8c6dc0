#pragma once
// The papers' runtimes as SchedulingPolicy strategies on the layer-wise
// simulator (planner/policies/layer_sim.h). planner/policy.h is the public
// entry point; these are its parts, exposed for tests.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/policies/layer_sim.h"

namespace mplan {

// vDNN §III-C: whose input feature maps are offloaded in the forward pass.
enum class VdnnOffload { none, conv, all };
// vDNN §III-C: memory-optimal (zero workspace), performance-optimal (fastest,
// failing if its workspace does not fit), or the dynamic policy's greedy
// downgrade (the fastest whose workspace fits the memory free at the step).
enum class VdnnAlgorithms { memory_optimal, performance_optimal, greedy };

struct BaselineRun {
  std::vector<int64_t> sub_batches;
  int64_t arena_bytes = 0;
  int copy_engines = 1;
};

// One vDNN configuration. vDNN has one memory stream for offloads and
// prefetches (§III-B), so BaselineRun::copy_engines is 1 for vDNN runs.
LayerSimResult run_vdnn(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run, VdnnOffload offload,
                        VdnnAlgorithms algorithms);

struct VdnnDynResult {
  LayerSimResult sim;
  std::string pass;  // the profiling pass whose configuration was adopted
};
// vDNN §III-C dynamic policy: (1) all + memory-optimal must fit, else
// infeasible; (2) no offload + fastest; then conv, all with fastest; (3) conv,
// all with the greedy downgrade; else the configuration of pass (1).
VdnnDynResult run_vdnn_dyn(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run);

// SuperNeurons §3.2-3.5 (see superneurons.cpp).
LayerSimResult run_superneurons(const Tdfg& tdfg, const CostModel& cost, const BaselineRun& run);

// Unlimited memory (the arena is as large as it needs), fastest options, no copies
// but the input loads.
LayerSimResult run_ideal(const Tdfg& tdfg, const CostModel& cost, int64_t batch);

}  // namespace mplan
