#pragma once
// The generated program's part of a plan of several ranks (plan.json
// "data_parallel"; docs/generated-program.md, "Several ranks"): which compute
// step starts which gradient bucket's sum over the ranks, and the tables of
// the program's DataParallelSpec (runtime/collectives.h).

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"
#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan::codegen {

// Whether a plan trains on several ranks.
inline bool is_data_parallel(const Plan& plan) { return plan.data_parallel.ranks > 1; }

// The buckets started after each compute step (plan step index -> bucket
// ids). Errors: a bucket whose ready step is not a compute step of the last
// round, or whose blocks are not resident weight gradients.
Result<std::map<int32_t, std::vector<int32_t>>> bucket_starts(const Tdfg& tdfg, const Plan& plan);

// The digest every rank checks at start: a hash of every rank's plan's text.
std::string plans_digest(const Plan& plan, const std::vector<const Plan*>& rank_plans);

// kBucketRegions, kBuckets, kRunningStatistics and kDataParallel (the
// program's DataParallelSpec, with `digest`); with `per_rank_specs`, its
// spec_of_rank is the program's spec_of_rank (declared before, defined after
// every schedule).
std::string emit_data_parallel_tables(const Model& model, const Tdfg& tdfg, const Plan& plan,
                                      const std::string& digest, bool per_rank_specs);

}  // namespace mplan::codegen
