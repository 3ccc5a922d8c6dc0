#include "tests/e2e/data_parallel_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "frontend/parse.h"
#include "planner/sub_batch.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"

namespace mplan::e2e {

const char* scheme_name(RankScheme scheme) {
  switch (scheme) {
    case RankScheme::rounds: return "rounds";
    case RankScheme::sub_batches: return "sub_batches";
    case RankScheme::offload: return "offload";
    case RankScheme::recompute: return "recompute";
  }
  return "?";
}

int64_t rank_sub_batch(int64_t global_batch, int ranks, RankScheme scheme) {
  const int64_t batch = global_batch / ranks;
  return scheme == RankScheme::sub_batches ? std::max<int64_t>(1, batch / 2) : batch;
}

void add_data_parallel(Plan& plan, const Tdfg& tdfg, int ranks, int64_t bucket_bytes) {
  // The last compute step of the last round that writes each dW block.
  const int32_t last_round = static_cast<int32_t>(plan.sub_batches.size()) - 1;
  std::map<BlockId, int32_t> final_step;
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::compute || step.round != last_round) continue;
    for (BufferId w : step.writes) {
      const BlockId b = plan.buffers[w].block;
      if (b != kNoBlock && tdfg.blocks[b].kind == BlockKind::weight_grad) final_step[b] = step.index;
    }
  }
  std::vector<std::pair<int32_t, BlockId>> order;
  for (const auto& [block, step] : final_step) order.emplace_back(step, block);
  std::sort(order.begin(), order.end());
  DataParallel& dp = plan.data_parallel;
  dp.ranks = ranks;
  dp.rank = 0;
  dp.global_batch = plan.batch * ranks;
  dp.machine = "test";
  dp.policy = "same plan on every rank";
  dp.plan_of_rank.assign(static_cast<size_t>(ranks), 0);
  dp.bucket_bytes = bucket_bytes;
  dp.buckets.clear();
  for (const auto& [step, block] : order) {
    int64_t bytes = 0;
    for (const Buffer& b : plan.buffers)
      if (b.resident && b.block == block) bytes = b.bytes;
    if (dp.buckets.empty() || dp.buckets.back().bytes + bytes > bucket_bytes) dp.buckets.emplace_back();
    GradientBucket& bucket = dp.buckets.back();
    bucket.blocks.push_back(block);
    bucket.bytes += bytes;
    bucket.ready_after_step = std::max(bucket.ready_after_step, step);
  }
}

Compiled compile_ranks(const std::string& model_path, int ranks, RankScheme scheme, const std::string& tag,
                       codegen::Target target) {
  Result<Model> model = load_model(source_dir() + "/" + model_path);
  if (!model) return Compiled{{}, "", model.error().to_string()};
  Result<Device> device = load_device("k40");
  if (!device) return Compiled{{}, "", device.error().to_string()};
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);
  const int64_t batch = model->batch / ranks;
  Plan plan;
  if (scheme == RankScheme::recompute) {
    // drop_everything_plan plans its model's batch: the model at B, the plan then the model's.
    Model share = *model;
    share.batch = batch;
    PlanResult sim = drop_everything_plan(share, cost);
    if (!sim.feasible) return Compiled{{}, "", "drop_everything_plan: " + sim.note};
    plan = std::move(sim.plan);
    plan.model_digest = model_digest(*model);
  } else {
    PlanOptions options;
    options.batch = batch;
    options.sub_batch = rank_sub_batch(model->batch, ranks, scheme);
    options.budget_bytes = int64_t{1} << 30;
    if (scheme == RankScheme::offload)
      options.budget_bytes =
          resident_region_bytes(tdfg) + max_task_arena_bytes(tdfg, cost, batch, /*fastest=*/false) + 4096;
    Result<Plan> planned = plan_iteration(tdfg, cost, options).take_plan();
    if (!planned) return Compiled{{}, "", "plan_iteration: " + planned.error().to_string()};
    plan = std::move(*planned);
  }
  add_data_parallel(plan, tdfg, ranks, /*bucket_bytes=*/4096);
  return write_plan_program(*model, std::move(plan), tag, target);
}

Compiled compile_single_process(const std::string& model_path, int64_t sub_batch, const std::string& tag) {
  Result<Model> model = load_model(source_dir() + "/" + model_path);
  if (!model) return Compiled{{}, "", model.error().to_string()};
  Result<Device> device = load_device("k40");
  if (!device) return Compiled{{}, "", device.error().to_string()};
  const AnalyticCostModel cost(*device);
  PlanOptions options;
  options.sub_batch = sub_batch;
  options.budget_bytes = int64_t{1} << 30;
  Result<Plan> plan = plan_iteration(build_tdfg(*model), cost, options).take_plan();
  if (!plan) return Compiled{{}, "", "plan_iteration: " + plan.error().to_string()};
  return write_plan_program(*model, std::move(*plan), tag);
}

std::string build_ranks_program(const std::string& dir) {
#ifdef MPLAN_RUNTIME_MPI_LIBRARY_PATH
  return build_program(dir);
#else
  return "this build has no MPI: the runtime's collectives (mplan_runtime_mpi) are not built";
#endif
}

bool have_mpirun() { return run_command("command -v mpirun").exit_code == 0; }

std::string mpirun(int ranks) {
  return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks);
}

}  // namespace mplan::e2e
