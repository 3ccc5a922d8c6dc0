#pragma once
// Data-parallel plans (docs/multi-gpu.md): R ranks, each a GPU of the
// machine, each training its share of the global batch with a plan of its
// own iteration (planner/planner.h), the weight gradients summed over the
// ranks in buckets (gradient_buckets.h). One plan serves every rank whose
// schedule is the same; the ranks of a PCIe switch may get different plans
// so that their copies do not all cross the switch's uplink at once
// (papers/multi-gpu-vdnn.txt, §III). Every candidate is priced by the
// ranks' joint timing (rank_timing.h); the fastest is kept.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/data_parallel/gradient_buckets.h"
#include "planner/data_parallel/rank_timing.h"
#include "planner/planner.h"
#include "profiler/machine.h"

namespace mplan {

// How the ranks' plans are made (docs/multi-gpu.md, "Policies").
//   none     every rank runs the plan made as if it had the machine alone
//   paper    multi-GPU vDNN §III-A Steps 1-3, for the vDNN policies: within
//            a PCIe switch group the i-th GPU swaps only the layers
//            i % x + j x of those vDNN swaps, x the largest interval at which
//            every GPU's plan fits
//   search   mplan's: the plan made alone, and plans made for the host-link
//            share the ranks have while all of them copy (all of it, and
//            half); the fastest joint step wins
enum class Stagger { none, paper, search };
const char* stagger_name(Stagger stagger);
bool parse_stagger(const std::string& name, Stagger* stagger);

struct DataParallelOptions {
  int32_t ranks = 2;
  int64_t bucket_bytes = kDefaultBucketBytes;
  Stagger stagger = Stagger::search;
};

struct RankPlans {
  std::vector<PlanResult> plans;      // the distinct plans; plans[0] is rank 0's
  std::vector<int32_t> plan_index;    // per rank: its plan in `plans`
  std::vector<std::vector<GradientBucket>> buckets;  // per plan, timed by the joint step
  RanksTiming timing;
  std::string policy;                 // what won, in words ("alone", "paper, x = 3", ...)
  // Every candidate with its joint step time, in the order tried.
  std::vector<std::pair<std::string, double>> candidates;
  bool feasible = false;
  std::string note;                   // infeasible: why
};

// The ranks' plans of `tdfg` (a rank's share of the batch) on the first
// `ranks` GPUs of `machine` (node-major). `alone` is the rank's plan as if it
// had the machine to itself under `options` (compile has made it already,
// choosing the model variant); `cost` prices one GPU. Each plan's
// data_parallel section is filled, but for the machine's name.
RankPlans plan_data_parallel(const Tdfg& tdfg, const CostModel& cost, const Machine& machine,
                             const PlanOptions& options, const DataParallelOptions& data_parallel, PlanResult alone);

// How much longer a host copy of each rank takes, per direction (to the
// device, to the host), when every rank copies in that direction at once:
// the rate it has alone over the rate it then gets (>= 1).
std::vector<std::pair<double, double>> shared_copy_slowdown(const Machine& machine, int32_t ranks);

}  // namespace mplan
