#pragma once
// `mplan compile --gpus N [--machine FILE]` (docs/multi-gpu.md): the flags of
// data-parallel plans, the machine the ranks run on, and the ranks' plans
// made from the plan one rank would have alone.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "planner/data_parallel/data_parallel.h"
#include "profiler/cost_model.h"
#include "profiler/machine.h"

namespace mplan::driver {

struct DataParallelFlags {
  int32_t gpus = -1;           // --gpus; -1: not given
  std::string machine;         // --machine
  std::string stagger;         // --stagger; "": the policy's default
  std::string bucket_size;     // --bucket-size; "": kDefaultBucketBytes
};

struct DataParallelSettings {
  int32_t gpus = 0;                       // 0: one, or every GPU of --machine
  std::string machine;                    // a machine file or a shipped machine's name; "": standalone
  std::optional<Stagger> stagger;         // none given: the policy's default
  int64_t bucket_bytes = kDefaultBucketBytes;
  bool given() const { return gpus > 0 || !machine.empty(); }
};

// Checks the flags that need no file; errors are usage errors naming the flag.
Result<DataParallelSettings> check_data_parallel_flags(const DataParallelFlags& flags, PolicyKind policy);

// The machine and rank count: --machine's file (all of its GPUs unless
// --gpus says fewer; its GPUs must be alike), else `gpus` GPUs each with a
// PCIe link of its own, whose device complete_standalone fills in from the
// cost model once it is made.
struct RankMachine {
  Machine machine;
  int32_t ranks = 1;
  bool standalone = true;  // no --machine
  std::string line;        // what compile prints: "ranks: 4 on p100x4-two-switches (...)"
};
Result<RankMachine> load_rank_machine(const DataParallelSettings& settings);
void complete_standalone(RankMachine& machine, const CostModel& cost, const std::string& device_name);

// The global batch over the ranks: the per-rank batch, or a usage error that
// says which batches divide.
Result<int64_t> rank_batch(int64_t global_batch, int32_t ranks, bool batch_given);

struct RankPlanFiles {
  std::vector<PlanResult> plans;  // the distinct plans, rank 0's first, data_parallel sections filled
  std::vector<int32_t> first_rank;  // per plan: the lowest rank running it (its file's rank)
  RanksTiming timing;
  std::string text;               // what compile prints about the ranks
  std::string trace_json;         // every rank's re-timed streams and the all-reduces
};

// The ranks' plans (planner/data_parallel/data_parallel.h) from `alone`;
// `finish` fills a plan's header as compile does for the one it made.
RankPlanFiles plan_ranks(const Tdfg& tdfg, const CostModel& cost, const RankMachine& machine,
                         const PlanOptions& options, const DataParallelSettings& settings, PlanResult alone,
                         const std::function<void(Plan&)>& finish);

// "plan.json" for rank 0's plan, "plan-rank-<r>.json" for another rank's.
std::string rank_plan_file(int32_t rank);

}  // namespace mplan::driver
