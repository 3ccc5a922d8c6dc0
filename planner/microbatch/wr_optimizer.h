#pragma once
// Workspace Reuse (mu-cuDNN §III-B): each kernel owns a workspace of at most
// `workspace_limit_bytes`, reused by its micro-batches, so each kernel is
// optimized on its own by dynamic programming over the batch size:
//
//   T(B) = min( Tμ(B), min over 0 < b < B of T(b) + T(B − b) )
//
// where Tμ(b) is the fastest algorithm at micro-batch b whose workspace fits
// the limit (infinite when b is not one of the policy's sizes).

#include <cstdint>

#include "core/error.h"
#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/configuration.h"

namespace mplan::microbatch {

// The fastest configuration of the kernel at batch `batch` whose workspace is
// at most `workspace_limit_bytes`, using the micro-batch sizes of `policy`
// (the table must hold them). Among equally fast ones, the one with the least
// workspace, then the fewest micro-batches. An Error when no configuration
// fits, giving the least workspace any configuration needs.
Result<Configuration> optimize_wr(const BenchmarkTable& table, int64_t batch,
                                  int64_t workspace_limit_bytes, BatchSizePolicy policy);

// The least workspace any configuration of the kernel at batch `batch` needs
// under `policy`: the bottleneck version of the DP above,
// W(B) = min( Wμ(B), min over 0 < b < B of max(W(b), W(B − b)) ).
int64_t least_workspace_bytes(const BenchmarkTable& table, int64_t batch, BatchSizePolicy policy);

}  // namespace mplan::microbatch
