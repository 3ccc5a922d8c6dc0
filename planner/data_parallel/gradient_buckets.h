#pragma once
// Gradient buckets of data-parallel training (docs/multi-gpu.md, "Buckets"):
// the resident weight gradients grouped, in the order the last round's
// backward pass finishes them, into all-reduces of about `bucket_bytes`
// each, so that the first can run on the link while the backward pass
// computes the rest (PyTorch DDP's gradient bucketing, bucket_cap_mb = 25).
// Only the last round's sums are all-reduced: earlier rounds accumulate into
// the same resident dW blocks (DDP's no_sync under gradient accumulation).

#include <cstdint>
#include <vector>

#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan {

// PyTorch DDP's default bucket: 25 MiB.
inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

// The buckets of `plan`: every resident dW block that a compute step of the
// last round writes, ordered by its last such step; a bucket closes once it
// holds at least `bucket_bytes` (the last one may hold less). Each bucket is
// ready after the latest of its blocks' last writers. Start and end times are
// left at 0 (the multi-rank timing fills them).
std::vector<GradientBucket> gradient_buckets(const Tdfg& tdfg, const Plan& plan, int64_t bucket_bytes);

}  // namespace mplan
