#pragma once
// The step of all ranks together, in simulated time (docs/multi-gpu.md,
// "Timing"). Every rank runs its plan's steps in the plan's order and stream
// semantics (planner/plan.h); its compute steps take their planned times, and
// its copies and the all-reduces are transfers over the machine's links,
// which all ranks share (profiler/link_sharing.h): at every moment each
// transfer runs at its max-min fair rate, never faster than it ran alone in
// its plan. Multi-GPU vDNN (papers/multi-gpu-vdnn.txt, §III-A) is the case
// this prices: GPUs behind one PCIe switch that copy at once each take longer.
//
// The all-reduce of gradient bucket k starts when every rank has run the
// bucket's ready step and bucket k - 1 is done (NCCL runs one stream's
// collectives in order), takes 2 (R - 1) hop latencies and then NCCL's ring
// traffic -- 2 (R - 1) / R of the bucket from every rank to the next -- on
// the links each hop crosses, sharing them with the host copies. Each rank's
// update waits for every bucket. Not modelled: the SMs NCCL's kernels take
// from compute.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "profiler/machine.h"
#include "tdfg/tdfg.h"

namespace mplan {

// Rank r runs `plan` with its buckets (gradient_buckets of that plan) on GPU
// r % gpus of node r / gpus of the machine.
struct RankSchedule {
  const Plan* plan = nullptr;
  const std::vector<GradientBucket>* buckets = nullptr;
};

struct RankTiming {
  std::vector<double> start_ms, end_ms;  // per step of the rank's plan
  double finish_ms = 0;                  // its last step's end
  double copy_ms = 0;                    // its copies' durations, summed
  double alone_copy_ms = 0;              // the same copies' durations in its plan (alone on the machine)
};

struct RanksTiming {
  std::vector<RankTiming> ranks;
  std::vector<GradientBucket> buckets;   // rank 0's buckets with each all-reduce's start and end
  double step_ms = 0;                    // the last rank's finish
  std::vector<LinkUse> links;            // every link that carried a transfer, most transfers at once first
};

// The ranks' step. The ranks' plans are of `tdfg` (the update task is the
// one every bucket must precede) and have the same buckets (blocks and
// bytes); the machine has at least as many GPUs as there are ranks.
RanksTiming time_ranks(const Tdfg& tdfg, const Machine& machine, const std::vector<RankSchedule>& ranks);

}  // namespace mplan
