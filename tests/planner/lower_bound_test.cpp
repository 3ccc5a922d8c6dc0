// The iteration lower bound (planner/lower_bound.h):
// - on every_op and every_vision_op (batch 8), it equals the least time over
//   every partition of the batch into rounds, enumerated here, each round's
//   tasks at their fastest option that fits the arena, undivided or as
//   micro-batches of powers of two at their least time per sample (computed
//   here from the cost model's options), plus the update;
// - it is below the plans with micro-batched convolutions that beat every
//   undivided plan (the default workspace mode makes them);
// - on tiny graphs it is never above the time of any feasible plan: every
//   policy, and mplan's search at every sub-batch, at budgets from 1.01x the
//   least one upward;
// - its memory term is positive where one round does not fit, zero where it does;
// - the first task waits for the copy of its input, in the first round.

#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "frontend/parse.h"
#include "planner/lower_bound.h"
#include "planner/planner.h"
#include "planner/sub_batch.h"
#include "planner_test_util.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/profile.h"
#include "tdfg/bounds.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

struct Loaded {
  Model model;
  Tdfg tdfg;
};

Loaded load(const std::string& stem) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml");
  EXPECT_TRUE(model.ok());
  Loaded l{std::move(model).value(), {}};
  l.tdfg = build_tdfg(l.model);
  return l;
}

AnalyticCostModel k40() {
  Result<Device> d = load_device("k40");
  EXPECT_TRUE(d.ok());
  return AnalyticCostModel(*d);
}

// A round of s samples, by the definition: every task but the update at its
// fastest option whose workspace fits the arena with the task's blocks, or,
// for a convolution, micro-batches of a power of two below s (mu-cuDNN's
// powerOfTwo) that fit, at the least time per sample of any, times s.
// `micro` false: undivided options only.
double round_by_hand(const Tdfg& tdfg, const CostModel& cost, int64_t arena, int64_t s, bool micro = true) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    if (t == tdfg.update_task) continue;
    double best = std::numeric_limits<double>::infinity();
    for (const TaskOption& o : cost.options(tdfg, t, s))
      if (task_arena_bytes(tdfg, t, s, o.workspace_bytes) <= arena) best = std::min(best, o.time_ms);
    for (int64_t m = 1; micro && tdfg.tasks[t].has_algorithms && m < s; m *= 2)
      for (const TaskOption& o : cost.options(tdfg, t, m))
        if (task_arena_bytes(tdfg, t, s, o.workspace_bytes) <= arena)
          best = std::min(best, o.time_ms / static_cast<double>(m) * static_cast<double>(s));
    ms += best;
  }
  return ms;
}

// The least time over every partition of n into parts of at least `least`.
double best_partition(int64_t n, int64_t least, const std::function<double(int64_t)>& round) {
  double best = std::numeric_limits<double>::infinity();
  std::function<void(int64_t, int64_t, double)> walk = [&](int64_t left, int64_t largest, double sum) {
    if (left == 0) {
      best = std::min(best, sum);
      return;
    }
    for (int64_t s = std::min(left, largest); s >= least; --s) walk(left - s, s, sum + round(s));
  };
  walk(n, n, 0);
  return best;
}

TEST(LowerBound, IsTheBestPartitionOfTheBatchEnumerated) {
  const AnalyticCostModel cost = k40();
  for (const char* stem : {"every_op", "every_vision_op"}) {
    const Loaded l = load(stem);
    const int64_t least = least_batchnorm_round(l.tdfg);
    const int64_t roomy = max_task_arena_bytes(l.tdfg, cost, l.model.batch, /*fastest=*/true);
    const int64_t tight = max_task_arena_bytes(l.tdfg, cost, least, /*fastest=*/false);
    for (int64_t arena : {roomy, (roomy + tight) / 2, tight}) {
      SCOPED_TRACE(std::string(stem) + " arena " + std::to_string(arena));
      const IterationLowerBound bound = iteration_lower_bound(l.tdfg, cost, arena, l.model.batch, least);
      ASSERT_TRUE(bound.found);
      const double update = fastest_option(cost, l.tdfg, l.tdfg.update_task, l.model.batch).time_ms;
      const double want =
          best_partition(l.model.batch, least, [&](int64_t s) { return round_by_hand(l.tdfg, cost, arena, s); });
      EXPECT_NEAR(bound.compute_ms, want + update, 1e-9 * want);
      EXPECT_GE(bound.ms, bound.compute_ms);
      int64_t total = 0;
      for (int64_t s : bound.rounds) total += s;
      EXPECT_EQ(total, l.model.batch);
    }
    // Below the least arena no round fits.
    EXPECT_FALSE(iteration_lower_bound(l.tdfg, cost, tight / 2, l.model.batch, least).found);
  }
}

// The K40's analytic model with copies `slowdown` times slower, and batch
// norm's recomputation at `recompute_fraction` of its forward where given.
class SlowCopies final : public CostModel {
 public:
  SlowCopies(const CostModel& inner, double slowdown, std::optional<double> recompute_fraction = std::nullopt)
      : inner_(inner), slowdown_(slowdown), recompute_fraction_(recompute_fraction) {}
  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t b) const override {
    return inner_.options(tdfg, t, b);
  }
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t b) const override {
    if (!recompute_fraction_) return inner_.recompute_from_saved_ms(tdfg, t, b);
    return *recompute_fraction_ * inner_.options(tdfg, t, b).front().time_ms;
  }
  double host_to_device_ms(int64_t bytes) const override { return slowdown_ * inner_.host_to_device_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return slowdown_ * inner_.device_to_host_ms(bytes); }
  int copy_engines() const override { return inner_.copy_engines(); }
  int64_t device_memory_bytes() const override { return inner_.device_memory_bytes(); }
  std::string describe() const override { return "slow copies"; }

 private:
  const CostModel& inner_;
  double slowdown_;
  std::optional<double> recompute_fraction_;
};

// cifar_resnet in one round of its whole batch, in an arena that holds its
// largest task but not everything the backward pass needs: what does not fit
// must be copied out and back or computed again. On the K40's own link the
// copies out cannot all leave during the forward pass; with copies 100
// times slower the bound counts the cheapest mix, and no plan in that arena
// is faster. With room there is nothing to count.
TEST(LowerBound, CountsWhatMakingRoomCosts) {
  const AnalyticCostModel k40_cost = k40();
  const SlowCopies slow(k40_cost, 100.0);
  const Loaded l = load("cifar_resnet");
  const int64_t batch = l.model.batch;
  const int64_t task = max_task_arena_bytes(l.tdfg, slow, batch, /*fastest=*/false);
  const int64_t roomy = 4 * compute_bounds(l.tdfg, batch).liveness_peak_bytes;
  const IterationLowerBound with_room = iteration_lower_bound(l.tdfg, slow, roomy, batch, batch);
  ASSERT_TRUE(with_room.found);
  EXPECT_NEAR(with_room.ms, with_room.compute_ms + with_room.input_ms, 1e-9 * with_room.ms);
  const int64_t arena = 2 * task;
  // On the K40's own link the copies would hide behind the whole round, but
  // what is away at the fullest task must have left during the tasks before
  // it (the forward pass): more than that link moves then, so the bound is
  // above the compute stream's time, and still below every plan.
  const IterationLowerBound windowed = iteration_lower_bound(l.tdfg, k40_cost, arena, batch, batch);
  ASSERT_TRUE(windowed.found);
  EXPECT_GT(windowed.ms - windowed.input_ms, windowed.compute_ms) << "copies out must leave before the fullest task";
  PlanOptions any_split;
  any_split.budget_bytes = resident_region_bytes(l.tdfg) + arena;
  const PlanResult k40_plan = plan_iteration(l.tdfg, k40_cost, any_split);
  ASSERT_TRUE(k40_plan.feasible) << k40_plan.note;
  EXPECT_GE(k40_plan.plan.summary.simulated_ms, windowed.ms);
  const IterationLowerBound tight = iteration_lower_bound(l.tdfg, slow, arena, batch, batch);
  ASSERT_TRUE(tight.found);
  EXPECT_GT(tight.ms - tight.input_ms, tight.compute_ms) << "the excess costs something";
  PlanOptions o;
  o.budget_bytes = resident_region_bytes(l.tdfg) + arena;
  o.sub_batch = batch;
  const PlanResult r = plan_iteration(l.tdfg, slow, o);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_GE(r.plan.summary.simulated_ms, tight.ms);
  std::printf("cifar_resnet, one round in %lld bytes, copies 100x slower: bound %.3f ms (compute %.3f), "
              "plan %.3f ms\n",
              static_cast<long long>(arena), tight.ms, tight.compute_ms, r.plan.summary.simulated_ms);
  // Recomputing a batch norm's output costs what the cost model says its
  // recomputation costs (CostModel::recompute_ms), not its forward: cheaper
  // recomputations lower the bound, which stays below the plan.
  for (double fraction : {1.0, 0.05}) {
    SCOPED_TRACE(fraction);
    const SlowCopies priced(k40_cost, 100.0, fraction);
    const IterationLowerBound bound = iteration_lower_bound(l.tdfg, priced, arena, batch, batch);
    ASSERT_TRUE(bound.found);
    const PlanResult plan = plan_iteration(l.tdfg, priced, o);
    ASSERT_TRUE(plan.feasible) << plan.note;
    EXPECT_GE(plan.plan.summary.simulated_ms, bound.ms);
    if (fraction < 1) {
      const IterationLowerBound dear = iteration_lower_bound(l.tdfg, SlowCopies(k40_cost, 100.0, 1.0), arena, batch,
                                                             batch);
      EXPECT_LT(bound.ms, dear.ms - 1e-6);
    }
  }
}

// On the H200 profiles, where copies are slow beside the compute and the
// plans come within a few percent of the bound: at 0.5 to 0.25 of the
// unlimited plan's memory, one round, mplan's plan is never below it (a
// bound that overcounts -- the copies out added to the compute before the
// fullest task rather than overlapping it -- is above these plans).
// An iteration starts with its data on the host: the first task waits for
// the copy of its input, in whichever round comes first. cifar_small on the
// K40: with room for one round the bound is the compute stream plus that
// copy at the whole batch, and the unlimited plan's first task starts no
// earlier; in an arena that splits the batch the wait is the copy of the
// first round's input.
TEST(LowerBound, TheFirstTaskWaitsForItsInput) {
  const AnalyticCostModel cost = k40();
  const Loaded l = load("cifar_small");
  const int64_t batch = l.model.batch;
  ASSERT_EQ(l.tdfg.tasks[0].reads.front(), l.tdfg.input_block);
  const Block& input = l.tdfg.blocks[l.tdfg.input_block];
  const int64_t roomy = 4 * compute_bounds(l.tdfg, batch).liveness_peak_bytes;
  const IterationLowerBound whole = iteration_lower_bound(l.tdfg, cost, roomy, batch, batch);
  ASSERT_TRUE(whole.found);
  EXPECT_DOUBLE_EQ(whole.input_ms, cost.host_to_device_ms(input.bytes(batch)));
  EXPECT_NEAR(whole.ms, whole.compute_ms + whole.input_ms, 1e-9 * whole.ms);
  PlanOptions o;
  o.budget_bytes = resident_region_bytes(l.tdfg) + roomy;
  const PlanResult unlimited = plan_iteration(l.tdfg, cost, o);
  ASSERT_TRUE(unlimited.feasible) << unlimited.note;
  EXPECT_GE(unlimited.plan.summary.simulated_ms, whole.ms);
  double first_compute_ms = -1;
  for (const Step& s : unlimited.plan.steps)
    if (s.kind == StepKind::compute) {
      first_compute_ms = s.start_ms;
      break;
    }
  EXPECT_GE(first_compute_ms, whole.input_ms - 1e-9);

  const int64_t split_arena = 2 * max_task_arena_bytes(l.tdfg, cost, batch / 4, /*fastest=*/false);
  const IterationLowerBound split = iteration_lower_bound(l.tdfg, cost, split_arena, batch, 1);
  ASSERT_TRUE(split.found);
  ASSERT_GT(split.rounds.size(), 1u);
  EXPECT_DOUBLE_EQ(split.input_ms, cost.host_to_device_ms(input.bytes(split.rounds.front())));
  EXPECT_LT(split.input_ms, whole.input_ms);
  std::printf("cifar_small: the first task waits %.4f ms for the whole batch's input, %.4f ms for a first round "
              "of %lld\n",
              whole.input_ms, split.input_ms, static_cast<long long>(split.rounds.front()));
}

TEST(LowerBound, NoPlanIsFasterOnTheH200Profiles) {
  for (const char* stem : {"cifar_resnet"}) {
    const Loaded l = load(stem);
    Result<Profile> profile =
        load_profile(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/" + stem + "-h200.json");
    ASSERT_TRUE(profile.ok()) << profile.error().to_string();
    Result<std::unique_ptr<RecordedCostModel>> cost = RecordedCostModel::create(*profile, l.tdfg, {}, stem);
    ASSERT_TRUE(cost.ok()) << cost.error().to_string();
    PlanOptions unlimited;
    unlimited.budget_bytes = (*cost)->device_memory_bytes();
    const PlanResult u = plan_iteration(l.tdfg, **cost, unlimited);
    ASSERT_TRUE(u.feasible) << u.note;
    const int64_t memory = u.plan.resident_region_bytes + u.plan.summary.peak_arena_bytes;
    for (double fraction : {0.5, 0.33, 0.25}) {
      SCOPED_TRACE(std::string(stem) + " at " + std::to_string(fraction));
      PlanOptions o;
      o.budget_bytes = static_cast<int64_t>(fraction * static_cast<double>(memory));
      o.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
      const PlanResult r = plan_iteration(l.tdfg, **cost, o);
      ASSERT_TRUE(r.feasible) << r.note;
      const IterationLowerBound bound =
          iteration_lower_bound(l.tdfg, **cost, r.plan.arena_bytes, l.model.batch, least_batchnorm_round(l.tdfg));
      ASSERT_TRUE(bound.found);
      EXPECT_GE(r.plan.summary.simulated_ms, bound.ms);
      std::printf("%s at %.2f of %lld bytes: plan %.3f ms, bound %.3f ms (compute %.3f)\n", stem, fraction,
                  static_cast<long long>(memory), r.plan.summary.simulated_ms, bound.ms, bound.compute_ms);
    }
  }
}

// Table-built: on the fake cost model a convolution's fastest algorithm
// needs four times its input in workspace, and a launch makes small
// micro-batches slower per sample. One byte short of the largest task's
// fastest option at the whole batch, one round, micro-batches beat every
// undivided plan: the one-round bound is the round by hand with
// micro-batches, below the plan and below the round without them. One byte
// short of that task's fastest option at half the batch, the bound takes
// the micro-batches that fit, not the half that does not.
TEST(LowerBound, IsBelowPlansWithMicroBatchedConvolutions) {
  const Loaded l = load("cifar_small");
  testing::FakeCost cost;
  const int64_t batch = l.model.batch;
  const double update = fastest_option(cost, l.tdfg, l.tdfg.update_task, batch).time_ms;
  TaskId largest = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(l.tdfg.tasks.size()); ++t)
    if (task_arena_bytes(l.tdfg, t, batch, fastest_option(cost, l.tdfg, t, batch).workspace_bytes) >
        task_arena_bytes(l.tdfg, largest, batch, fastest_option(cost, l.tdfg, largest, batch).workspace_bytes))
      largest = t;
  ASSERT_TRUE(l.tdfg.tasks[largest].has_algorithms);
  const int64_t short_of_whole =
      task_arena_bytes(l.tdfg, largest, batch, fastest_option(cost, l.tdfg, largest, batch).workspace_bytes) - 1;
  const int64_t short_of_half =
      task_arena_bytes(l.tdfg, largest, batch, fastest_option(cost, l.tdfg, largest, batch / 2).workspace_bytes) - 1;
  for (int64_t arena : {short_of_whole, short_of_half}) {
    SCOPED_TRACE("arena " + std::to_string(arena));
    const IterationLowerBound bound = iteration_lower_bound(l.tdfg, cost, arena, batch, /*least_round=*/batch);
    ASSERT_TRUE(bound.found);
    EXPECT_NEAR(bound.compute_ms, round_by_hand(l.tdfg, cost, arena, batch) + update, 1e-9 * bound.compute_ms);
    EXPECT_LT(bound.compute_ms, round_by_hand(l.tdfg, cost, arena, batch, /*micro=*/false) + update);
  }
  PlanOptions o;
  o.budget_bytes = resident_region_bytes(l.tdfg) + short_of_whole;
  o.batchnorm_rounds = PlanOptions::BatchnormRounds::one;
  const PlanResult micro = plan_iteration(l.tdfg, cost, o);
  ASSERT_TRUE(micro.feasible) << micro.note;
  ASSERT_TRUE(std::any_of(micro.plan.choices.begin(), micro.plan.choices.end(),
                          [](const TaskChoice& c) { return !c.micro_batches.empty(); }));
  const IterationLowerBound bound =
      iteration_lower_bound(l.tdfg, cost, micro.plan.arena_bytes, batch, least_batchnorm_round(l.tdfg));
  ASSERT_TRUE(bound.found);
  EXPECT_GE(micro.plan.summary.simulated_ms, bound.ms);
}

TEST(LowerBound, NoPlanIsFasterOnTinyGraphs) {
  const AnalyticCostModel cost = k40();
  int plans = 0;
  for (const char* stem : {"every_op", "every_vision_op", "cifar_small"}) {
    const Loaded l = load(stem);
    const MemoryBounds bounds = compute_bounds(l.tdfg, l.model.batch);
    for (double factor : {1.01, 1.1, 1.5, 3.0, 20.0}) {
      PlanOptions o;
      o.budget_bytes = static_cast<int64_t>(factor * static_cast<double>(bounds.least_round_min_bytes));
      const int64_t arena = align_down(o.budget_bytes - resident_region_bytes(l.tdfg));
      const IterationLowerBound bound =
          iteration_lower_bound(l.tdfg, cost, arena, l.model.batch, least_batchnorm_round(l.tdfg));
      ASSERT_TRUE(bound.found) << stem << " x" << factor;
      auto check = [&](const PlanResult& r, const std::string& what) {
        if (!r.feasible) return;
        ++plans;
        EXPECT_GE(r.plan.summary.simulated_ms, bound.ms * (1 - 1e-9)) << stem << " x" << factor << " " << what;
      };
      for (PolicyKind policy : all_policies()) {
        if (policy == PolicyKind::ideal) continue;
        o.policy = policy;
        check(plan_iteration(l.tdfg, cost, o), policy_name(policy));
      }
      o.policy = PolicyKind::mplan;
      o.workspace = WorkspaceUse::dynamic;
      check(plan_iteration(l.tdfg, cost, o), "mplan, micro-batched convolutions");
      o.workspace = WorkspaceUse::automatic;
      for (int64_t b = 1; b <= l.model.batch; b += (l.model.batch > 8 ? 3 : 1)) {
        o.sub_batch = b;
        check(plan_iteration(l.tdfg, cost, o), "mplan at sub-batch " + std::to_string(b));
      }
      o.sub_batch = 0;
    }
  }
  EXPECT_GT(plans, 100);
}

}  // namespace
}  // namespace mplan
