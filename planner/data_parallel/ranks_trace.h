#pragma once
// trace.json of a data-parallel plan (docs/multi-gpu.md, "Inspecting"): one
// process per rank with its streams re-timed by the ranks' joint step
// (rank_timing.h), and each rank's all-reduce stream with the buckets.
// The Chrome trace event format, as planner/trace.h writes for one GPU.

#include <string>
#include <vector>

#include "planner/data_parallel/rank_timing.h"
#include "planner/plan.h"

namespace mplan {

// `plan_of_rank[r]` is the plan rank r runs; `timing` their joint step.
std::string ranks_to_trace_json(const std::vector<const Plan*>& plan_of_rank, const RanksTiming& timing);

}  // namespace mplan
