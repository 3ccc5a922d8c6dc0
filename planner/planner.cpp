#include "planner/planner.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "frontend/bytes.h"
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

  // moDNN §IV-A: Eq. 3 gives the start; the candidate with the best simulated time wins.
  std::vector<int64_t> candidates;
  int64_t start_b = options.sub_batch;  // where screening starts
  if (options.sub_batch > 0) {
    if (max_task_arena_bytes(tdfg, cost, options.sub_batch, /*fastest=*/false) > arena) {
      return Error{SourceLocation{"--sub-batch", 0, 0},
                   "sub-batch " + std::to_string(options.sub_batch) + " does not fit the arena of " +
                       bytes_text(arena) + "; the largest that fits is " +
                       std::to_string(largest_feasible_sub_batch(tdfg, cost, arena, batch))};
    }
    candidates.push_back(options.sub_batch);
  } else {
    int64_t b0 = eq3_sub_batch(tdfg, cost, arena, batch);
    int64_t bmax = largest_feasible_sub_batch(tdfg, cost, arena, batch);
    MPLAN_CHECK(bmax >= 1, "the minimum check admits sub-batch 1");
    start_b = std::min(b0, bmax);
    candidates = sub_batch_candidates(batch, start_b, bmax, options.max_sub_batch_candidates);
  }

  auto simulate = [&](int64_t b, double abandon_after_ms) {
    ScheduleOptions so;
    so.sub_batches = split_batch(batch, b);
    so.arena_bytes = arena;
    so.copy_engines = copy_engines;
    so.select_algorithms = options.select_algorithms;
    so.prefetch = options.prefetch;
    so.prefetch_lookahead_tasks = options.prefetch_lookahead_tasks;
    so.abandon_after_ms = abandon_after_ms;
    so.large_block_divisor = options.large_block_divisor;
    so.micro_batch_dynamic = options.workspace == PlanOptions::Workspace::dynamic;
    return schedule_iteration_within(tdfg, cost, so);
  };
  // Fastest wins; among equal times the larger sub-batch (fewer rounds).
  auto better = [](const Plan& p, const Plan& q) {
    return p.summary.simulated_ms < q.summary.simulated_ms ||
           (p.summary.simulated_ms == q.summary.simulated_ms && p.sub_batch > q.sub_batch);
  };
  // The Eq. 3 start first, then the others nearest it first (in ratio), so a
  // good plan is known early; with screening, a candidate's simulation stops
  // as soon as its compute stream passes the best time so far (it can only
  // end later), which gives the same winner as simulating every candidate.
  std::vector<int64_t> order = candidates;
  std::stable_sort(order.begin(), order.end(), [start_b](int64_t a, int64_t b) {
    auto distance = [start_b](int64_t x) {
      return x >= start_b ? static_cast<double>(x) / static_cast<double>(start_b)
                          : static_cast<double>(start_b) / static_cast<double>(x);
    };
    return distance(a) < distance(b);
  });
  Plan best;
  bool have = false;
  for (int64_t b : order) {
    double bound = have && options.screen_sub_batches ? best.summary.simulated_ms : 0;
    std::optional<Plan> p = simulate(b, bound);
    if (!p) continue;
    if (!have || better(*p, best)) {
      best = std::move(*p);
      have = true;
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
