#include "planner/planner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "frontend/bytes.h"
#include "planner/plan_limits.h"
#include "planner/scheduler.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace {

Error plan_error(const std::string& message) { return Error{SourceLocation{"--budget", 0, 0}, message}; }

std::string bytes_text(int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")";
}

// Ideal: unlimited memory, the fastest option of every task, the whole batch
// as one sub-batch, no copies.
double ideal_ms(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    ms += fastest_option(cost, tdfg, t, t == tdfg.update_task ? 1 : batch).time_ms;
  }
  return ms;
}

}  // namespace

Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options) {
  return make_plan(tdfg, cost, options, nullptr);
}

Result<Plan> make_plan(const Tdfg& tdfg, const CostModel& cost, const PlanOptions& options,
                       WorkspaceReport* report) {
  auto started = std::chrono::steady_clock::now();
  MPLAN_CHECK(tdfg.model != nullptr, "the TDFG has no model");
  if (options.budget_bytes <= 0) return plan_error("the memory budget must be positive");
  int64_t batch = options.batch > 0 ? options.batch : tdfg.model->batch;
  if (batch < 1) return plan_error("the batch must be at least 1");
  if (options.sub_batch < 0 || options.sub_batch > batch) {
    return Error{SourceLocation{"--sub-batch", 0, 0},
                 "sub-batch " + std::to_string(options.sub_batch) + " is not between 1 and the batch " +
                     std::to_string(batch)};
  }
  int copy_engines = options.copy_engines != 0 ? options.copy_engines : cost.copy_engines();
  if (copy_engines != 1 && copy_engines != 2) {
    return Error{SourceLocation{"--copy-engines", 0, 0},
                 "copy engines must be 1 or 2, not " + std::to_string(copy_engines)};
  }

  // moDNN Eq. 2: below the minimum no schedule exists.
  MinimumBudget min = minimum_budget(tdfg, cost);
  int64_t resident_region = resident_region_bytes(tdfg);
  int64_t arena = align_down(options.budget_bytes - resident_region);
  if (options.budget_bytes < min.bytes || arena < min.task_bytes) {
    std::string who = min.task == kNoTask ? std::string("the resident weights")
                                          : "task " + tdfg.tasks[min.task].name;
    return plan_error("budget " + bytes_text(options.budget_bytes) + " is below the minimum " +
                      bytes_text(min.bytes) + " for model '" + tdfg.model->name + "': " + who +
                      " needs " + bytes_text(min.task_bytes) + " at sub-batch 1 besides the " +
                      bytes_text(resident_region) + " of weights, gradients and optimizer state");
  }

  // The wd pool comes off the arena the blocks use (planner/scheduler.h).
  auto blocks_arena_of = [&](int64_t pool) { return arena - (pool > 0 ? align_up(pool) : 0); };
  const bool wd = options.workspace == WorkspaceUse::wd || options.workspace == WorkspaceUse::wd_auto;
  if (options.workspace == WorkspaceUse::wd && blocks_arena_of(options.workspace_bytes) <= 0) {
    return Error{SourceLocation{}, "--workspace 'wd:" + format_bytes(options.workspace_bytes) +
                                       "': the pool does not fit the arena of " + bytes_text(arena) +
                                       " (the budget less the resident weights)"};
  }
  if (options.workspace == WorkspaceUse::wd && blocks_arena_of(options.workspace_bytes) < min.task_bytes) {
    return Error{SourceLocation{},
                 "--workspace 'wd:" + format_bytes(options.workspace_bytes) + "': the pool leaves " +
                     bytes_text(std::max<int64_t>(0, blocks_arena_of(options.workspace_bytes))) +
                     " of the arena of " + bytes_text(arena) + ", less than the " + bytes_text(min.task_bytes) +
                     " that task " + tdfg.tasks[min.task].name + " needs at sub-batch 1"};
  }

  // moDNN §IV-A: Eq. 3 gives the start; the candidate with the best simulated
  // time wins. Returns the candidates and the start, or an Error for a fixed
  // sub-batch that does not fit.
  struct SubBatchCandidates {
    std::vector<int64_t> sizes;
    int64_t start = 0;
  };
  auto sub_batch_candidates_for = [&](int64_t blocks_arena) -> Result<SubBatchCandidates> {
    SubBatchCandidates c;
    if (options.sub_batch > 0) {
      if (max_task_arena_bytes(tdfg, cost, options.sub_batch, /*fastest=*/false) > blocks_arena) {
        return Error{SourceLocation{"--sub-batch", 0, 0},
                     "sub-batch " + std::to_string(options.sub_batch) + " does not fit the arena of " +
                         bytes_text(blocks_arena) + "; the largest that fits is " +
                         std::to_string(largest_feasible_sub_batch(tdfg, cost, blocks_arena, batch))};
      }
      c.sizes.push_back(options.sub_batch);
      c.start = options.sub_batch;
      return c;
    }
    int64_t b0 = eq3_sub_batch(tdfg, cost, blocks_arena, batch);
    int64_t bmax = largest_feasible_sub_batch(tdfg, cost, blocks_arena, batch);
    MPLAN_CHECK(bmax >= 1, "the minimum check admits sub-batch 1");
    c.start = std::min(b0, bmax);
    c.sizes = sub_batch_candidates(batch, c.start, bmax, options.max_sub_batch_candidates);
    return c;
  };

  // The WD problem per sub-batch (desirable sets do not depend on the pool).
  std::map<int64_t, WdProblem> wd_problems;
  auto wd_problem_at = [&](int64_t b) -> const WdProblem& {
    auto it = wd_problems.find(b);
    if (it == wd_problems.end()) it = wd_problems.emplace(b, wd_problem(tdfg, cost, split_batch(batch, b))).first;
    return it->second;
  };

  // Pools to try: none, the given one, or (wd:auto) powers of four from
  // 64 MiB and the sum of the fastest workspaces at each sub-batch candidate,
  // as long as the rest of the arena holds the largest task at sub-batch 1.
  std::vector<int64_t> pools = {0};
  if (options.workspace == WorkspaceUse::wd) pools = {options.workspace_bytes};
  if (options.workspace == WorkspaceUse::wd_auto) {
    for (int64_t p = int64_t{64} << 20; blocks_arena_of(p) >= min.task_bytes; p *= 4) pools.push_back(p);
    Result<SubBatchCandidates> all = sub_batch_candidates_for(arena);
    if (!all.ok()) return all.error();
    for (int64_t b : all->sizes) {
      int64_t p = fastest_total_workspace_bytes(wd_problem_at(b));
      if (p > 0 && blocks_arena_of(p) >= min.task_bytes) pools.push_back(p);
    }
    std::sort(pools.begin(), pools.end());
    pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  }

  auto simulate_with = [&](const std::vector<int64_t>& sub_batches, int64_t pool, KernelConfigurations fixed,
                           double abandon_after_ms, int large_block_divisor) {
    ScheduleOptions so;
    so.sub_batches = sub_batches;
    so.arena_bytes = arena;
    so.copy_engines = copy_engines;
    so.select_algorithms = options.select_algorithms;
    so.prefetch = options.prefetch;
    so.prefetch_lookahead_tasks = options.prefetch_lookahead_tasks;
    so.abandon_after_ms = abandon_after_ms;
    so.large_block_divisor = large_block_divisor;
    so.micro_batch_dynamic = options.workspace == WorkspaceUse::dynamic;
    so.fixed_configurations = std::move(fixed);
    so.workspace_pool_bytes = pool;
    return schedule_iteration_within(tdfg, cost, so);
  };
  // Plain best fit first: it keeps the arena compact (the peak is what the
  // plan really touches). Stacking large blocks from the top of the arena
  // avoids the fragmentation that makes tight budgets defragment or offload;
  // that placement is kept only when it is strictly faster.
  auto simulate = [&](const std::vector<int64_t>& sub_batches, int64_t pool, KernelConfigurations fixed,
                      double abandon_after_ms) {
    std::optional<Plan> compact = simulate_with(sub_batches, pool, fixed, abandon_after_ms, 0);
    if (options.large_block_divisor <= 0) return compact;
    const bool needed_copies = !compact || compact->summary.offload_count > 0 ||
                               compact->summary.defragmentation_count > 0;
    if (!needed_copies) return compact;
    const double bound = compact ? compact->summary.simulated_ms : abandon_after_ms;
    std::optional<Plan> stacked =
        simulate_with(sub_batches, pool, std::move(fixed), bound, options.large_block_divisor);
    if (stacked && (!compact || stacked->summary.simulated_ms < compact->summary.simulated_ms)) return stacked;
    return compact;
  };
  // Fastest wins; among equal times the larger sub-batch (fewer rounds).
  auto better = [](const Plan& p, const Plan& q) {
    return p.summary.simulated_ms < q.summary.simulated_ms ||
           (p.summary.simulated_ms == q.summary.simulated_ms && p.sub_batch > q.sub_batch);
  };
  Plan best;
  int64_t best_pool = 0;
  bool have = false;
  std::optional<Error> first_error;  // why a candidate was dropped
  for (int64_t pool : pools) {
    const int64_t blocks_arena = blocks_arena_of(pool);
    Result<SubBatchCandidates> candidates = sub_batch_candidates_for(blocks_arena);
    if (!candidates.ok()) {
      if (!first_error) first_error = candidates.error();
      continue;
    }
    // The Eq. 3 start first, then the others nearest it first (in ratio), so a
    // good plan is known early; with screening, a candidate's simulation stops
    // as soon as its compute stream passes the best time so far (it can only
    // end later), which gives the same winner as simulating every candidate.
    const int64_t start_b = candidates->start;
    std::vector<int64_t> order = candidates->sizes;
    std::stable_sort(order.begin(), order.end(), [start_b](int64_t a, int64_t b) {
      auto distance = [start_b](int64_t x) {
        return x >= start_b ? static_cast<double>(x) / static_cast<double>(start_b)
                            : static_cast<double>(start_b) / static_cast<double>(x);
      };
      return distance(a) < distance(b);
    });
    for (int64_t b : order) {
      if (Status limit = check_rounds(tdfg, batch, b); !limit) {  // issue 12: bounded rounds
        if (!first_error) first_error = limit.error();
        continue;
      }
      const std::vector<int64_t> sub_batches = split_batch(batch, b);
      KernelConfigurations fixed;
      if (options.workspace == WorkspaceUse::wr) {
        Result<KernelConfigurations> wr = wr_configurations(tdfg, cost, sub_batches, options.workspace_bytes);
        if (!wr.ok()) {
          if (!first_error) first_error = wr.error();
          continue;
        }
        fixed = std::move(wr).value();
        // Each task must fit beside its fixed workspace (the scheduler's premise).
        std::string too_big;
        for (const auto& [key, c] : fixed) {
          if (task_arena_bytes(tdfg, key.first, key.second, c.workspace_bytes()) > blocks_arena) {
            too_big = tdfg.tasks[key.first].name;
            break;
          }
        }
        if (!too_big.empty()) {
          if (!first_error) {
            first_error = Error{SourceLocation{},
                                "--workspace 'wr:" + format_bytes(options.workspace_bytes) + "': task " +
                                    too_big + " at sub-batch " + std::to_string(b) +
                                    " does not fit the arena of " + bytes_text(arena) +
                                    " beside its WR workspace; use a smaller limit"};
          }
          continue;
        }
      } else if (wd) {
        Result<KernelConfigurations> division = wd_configurations(wd_problem_at(b), pool);
        if (!division.ok()) {
          if (!first_error) first_error = division.error();
          continue;
        }
        fixed = std::move(division).value();
      }
      double bound = have && options.screen_sub_batches ? best.summary.simulated_ms : 0;
      std::optional<Plan> p = simulate(sub_batches, pool, std::move(fixed), bound);
      if (!p) continue;
      if (!have || better(*p, best)) {
        best = std::move(*p);
        best_pool = pool;
        have = true;
      }
    }
  }
  if (!have) {
    MPLAN_CHECK(first_error.has_value(), "no sub-batch candidate was simulated");
    return *first_error;
  }
  if (wd) {
    best.summary.notes.push_back("conv workspaces share a pool of " + format_bytes(best_pool) +
                                 " at the top of the arena (mu-cuDNN WD)");
    if (report != nullptr) {
      report->pool_bytes = best_pool;
      report->wd_problem = wd_problem_at(best.sub_batch);
    }
  }
  MPLAN_CHECK(have, "no sub-batch candidate was simulated");

  best.model_name = tdfg.model->name;
  best.model_digest = plan_model_digest(*tdfg.model);
  best.device = cost.describe();
  best.budget_bytes = options.budget_bytes;
  best.resident_bytes = tdfg.resident_bytes();
  best.batch = batch;
  best.summary.ideal_ms = ideal_ms(tdfg, cost, batch);
  if (best.sub_batches.size() > 1) {
    best.summary.notes.push_back("the batch of " + std::to_string(batch) + " runs as " +
                                 std::to_string(best.sub_batches.size()) +
                                 " sub-batches; gradients accumulate and the update runs once");
    for (const Layer& l : tdfg.model->layers) {
      if (l.op == Op::batchnorm) {
        best.summary.notes.push_back("batchnorm statistics are per sub-batch");
        break;
      }
    }
  }
  best.summary.planner_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return best;
}

}  // namespace mplan
