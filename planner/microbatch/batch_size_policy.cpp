#include "planner/microbatch/batch_size_policy.h"

#include <fmt/format.h>

namespace mplan::microbatch {

const char* batch_size_policy_name(BatchSizePolicy policy) {
  switch (policy) {
    case BatchSizePolicy::all: return "all";
    case BatchSizePolicy::power_of_two: return "powerOfTwo";
    case BatchSizePolicy::undivided: return "undivided";
  }
  MPLAN_CHECK(false, "unknown batch size policy");
}

Result<BatchSizePolicy> parse_batch_size_policy(std::string_view text) {
  if (text == "all") return BatchSizePolicy::all;
  if (text == "powerOfTwo" || text == "power_of_two") return BatchSizePolicy::power_of_two;
  if (text == "undivided") return BatchSizePolicy::undivided;
  return Error{{}, fmt::format("unknown batch size policy '{}': expected all, powerOfTwo or undivided",
                               text)};
}

std::vector<int64_t> micro_batch_sizes(BatchSizePolicy policy, int64_t batch) {
  MPLAN_CHECK(batch >= 1, "a kernel's batch must be at least 1");
  std::vector<int64_t> sizes;
  switch (policy) {
    case BatchSizePolicy::all:
      for (int64_t b = 1; b <= batch; ++b) sizes.push_back(b);
      break;
    case BatchSizePolicy::power_of_two:
      for (int64_t b = 1; b <= batch; b *= 2) sizes.push_back(b);
      if (sizes.back() != batch) sizes.push_back(batch);
      break;
    case BatchSizePolicy::undivided:
      sizes.push_back(batch);
      break;
  }
  return sizes;
}

}  // namespace mplan::microbatch
