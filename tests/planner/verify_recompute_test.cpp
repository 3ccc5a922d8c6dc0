// The verifier against recomputation faults on chains of in-place tasks
// (docs/plan-format.md, "Recomputation"): a block written by a batch norm and
// then, in place, by its ReLU holds the ReLU's output for every later reader.
// A plan whose recomputation reruns the chain only in part, or reruns the
// ReLU on its own output without the batch norm, leaves other values there:
// silent corruption that only the order of the block's writers reveals.
// Also: a prefetch freed before anything read it is legal but wasteful, and
// verify says so.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::erase_step;
using testing::has_kind;
using testing::plan_example;
using testing::Planned;

bool shared_block(const Plan& plan, BufferId id) {
  const Buffer& b = plan.buffers[static_cast<size_t>(id)];
  return b.block != kNoBlock && plan.block_names[static_cast<size_t>(b.block)].find('+') != std::string::npos;
}

// cifar_resnet as one round of 64 at a budget that makes the planner drop
// and recompute its BN+ReLU blocks: the first of a few budgets (fractions of
// the ideal plan's need) whose plan recomputes such a chain.
const Planned& chain_plan() {
  static const Planned p = [] {
    for (int64_t budget : {int64_t{74046375}, int64_t{52890268}, int64_t{31734160}}) {
      Planned planned = plan_example("cifar_resnet", budget, /*copy_engines=*/2, /*sub_batch=*/64);
      for (const Step& s : planned.plan.steps)
        if (s.kind == StepKind::compute && s.recompute &&
            std::any_of(s.writes.begin(), s.writes.end(), [&](BufferId w) { return shared_block(planned.plan, w); }))
          return planned;
    }
    ADD_FAILURE() << "no plan of cifar_resnet recomputes a chain of in-place tasks";
    return Planned{};
  }();
  return p;
}

std::vector<Violation> verify(const Plan& plan) { return verify_plan(plan, chain_plan().tdfg); }

// The recompute steps of one chain in one round: its first writer's, then
// the in-place writer's (e.g. FP(bn1) then FP(relu1) on Y[bn1+relu1]).
struct ChainSteps {
  int first = -1, last = -1;
};
ChainSteps recomputed_chain(const Plan& plan, const Tdfg& tdfg) {
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute || !s.recompute) continue;
    for (BufferId w : s.writes) {
      if (!shared_block(plan, w)) continue;
      const std::vector<TaskId>& writers = tdfg.blocks[plan.buffers[w].block].writers;
      if (writers.size() < 2 || writers.front() != s.task) continue;
      // The next recompute step of the chain's last writer in the same round.
      for (size_t i = static_cast<size_t>(s.index) + 1; i < plan.steps.size(); ++i) {
        const Step& t = plan.steps[i];
        if (t.kind == StepKind::compute && t.recompute && t.round == s.round && t.task == writers.back())
          return {s.index, t.index};
      }
    }
  }
  return {};
}

TEST(VerifyRecompute, ThePlanRecomputesAChainAndIsValid) {
  const Plan& plan = chain_plan().plan;
  const ChainSteps chain = recomputed_chain(plan, chain_plan().tdfg);
  ASSERT_GE(chain.first, 0) << "the plan recomputes no BN+ReLU chain";
  const auto v = verify(plan);
  EXPECT_TRUE(v.empty()) << describe(v);
}

// Fault 1: the chain's last writer's recomputation left out; its first
// writer's kept. The next reader reads pre-ReLU values.
TEST(VerifyRecompute, AChainRecomputedOnlyInPartIsReported) {
  Plan plan = chain_plan().plan;
  const ChainSteps chain = recomputed_chain(plan, chain_plan().tdfg);
  ASSERT_GE(chain.last, 0);
  const Step removed = plan.steps[static_cast<size_t>(chain.last)];
  erase_step(plan, static_cast<size_t>(chain.last));
  // Its event, if it recorded one, moves to the previous step of the chain, so
  // that only the missing rerun is wrong.
  if (removed.records >= 0) plan.steps[static_cast<size_t>(chain.first)].records = removed.records;
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::chain)) << describe(v);
  bool named = false;
  for (const Violation& x : v)
    named |= x.kind == ViolationKind::chain && x.message.find("not rerun in full") != std::string::npos;
  EXPECT_TRUE(named) << describe(v);
}

// Fault 2: an in-place task recomputed on its own output, without the chain's
// first writer: a second FP(relu) right after the first, reading and writing
// the block that already holds its output. ReLU happens to be idempotent; an
// in-place op that is not would compute another value.
TEST(VerifyRecompute, AnInPlaceTaskRecomputedOnItsOwnOutputIsReported) {
  Plan plan = chain_plan().plan;
  const Tdfg& tdfg = chain_plan().tdfg;
  int at = -1;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute || s.recompute || s.task < 0) continue;
    const Task& task = tdfg.tasks[static_cast<size_t>(s.task)];
    if (task.in_place && task.kind == TaskKind::FP && !task.recompute_writes.empty()) {
      at = s.index;
      break;
    }
  }
  ASSERT_GE(at, 0) << "no in-place FP task in the plan";
  Step again = plan.steps[static_cast<size_t>(at)];
  again.recompute = true;
  again.waits.clear();
  again.records = -1;
  plan.steps.insert(plan.steps.begin() + at + 1, again);
  for (size_t i = 0; i < plan.steps.size(); ++i) plan.steps[i].index = static_cast<int32_t>(i);
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::chain)) << describe(v);
  bool named = false;
  for (const Violation& x : v)
    named |= x.kind == ViolationKind::chain && x.message.find("on its own output") != std::string::npos;
  EXPECT_TRUE(named) << describe(v);
}

// A prefetch whose buffer is freed before any step reads it: warned about,
// with the buffer and both steps named; the valid plan has no such warning.
TEST(VerifyRecompute, APrefetchFreedUnreadIsWarnedAbout) {
  VerifiedFigures figures;
  EXPECT_TRUE(verify_plan(chain_plan().plan, chain_plan().tdfg, &figures).empty());
  EXPECT_EQ(figures.prefetches_freed_unread, 0) << (figures.warnings.empty() ? "" : figures.warnings.front());
  Plan plan = chain_plan().plan;
  const auto prefetch = std::find_if(plan.steps.begin(), plan.steps.end(), [&](const Step& s) {
    return s.kind == StepKind::prefetch && plan.buffers[static_cast<size_t>(s.buffer)].block != chain_plan().tdfg.input_block;
  });
  ASSERT_NE(prefetch, plan.steps.end());
  Step free_now;
  free_now.kind = StepKind::free;
  free_now.stream = StreamKind::host;
  free_now.buffer = prefetch->buffer;
  free_now.round = prefetch->round;
  free_now.start_ms = free_now.end_ms = prefetch->end_ms;
  const int32_t prefetch_index = prefetch->index;
  plan.steps.insert(prefetch + 1, free_now);
  for (size_t i = 0; i < plan.steps.size(); ++i) plan.steps[i].index = static_cast<int32_t>(i);
  verify_plan(plan, chain_plan().tdfg, &figures);
  ASSERT_EQ(figures.prefetches_freed_unread, 1);
  EXPECT_EQ(figures.bytes_prefetched_unread, plan.buffers[static_cast<size_t>(free_now.buffer)].bytes);
  ASSERT_EQ(figures.warnings.size(), 1u);
  EXPECT_NE(figures.warnings[0].find("freed unread"), std::string::npos) << figures.warnings[0];
  EXPECT_NE(figures.warnings[0].find(fmt::format("step {}", prefetch_index)), std::string::npos) << figures.warnings[0];
}

}  // namespace
}  // namespace mplan
