#pragma once
// Which micro-batch sizes are benchmarked and may be used (mu-cuDNN §III-D,
// "batch size policy"):
//   all         1, 2, ..., B: always finds the optimum, B benchmarks per kernel;
//   powerOfTwo  1, 2, 4, ... up to B, and B itself: log2(B)+1 benchmarks;
//   undivided   B only: the same choice as plain cuDNN (the baseline).
// mu-cuDNN's own optimizer adds B to powerOfTwo when B is not a power of two,
// so the undivided configuration is always a candidate; so do we.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace mplan::microbatch {

enum class BatchSizePolicy { all, power_of_two, undivided };

// "all", "powerOfTwo", "undivided" (the paper's spelling).
const char* batch_size_policy_name(BatchSizePolicy policy);

// Parses the paper's spelling (also "power_of_two"); an Error lists the choices.
Result<BatchSizePolicy> parse_batch_size_policy(std::string_view text);

// The micro-batch sizes the policy allows for a kernel of batch `batch`
// (>= 1), ascending and without duplicates.
std::vector<int64_t> micro_batch_sizes(BatchSizePolicy policy, int64_t batch);

}  // namespace mplan::microbatch
