// Defragmentation around the task (ModnnRules::defragment_around_task,
// planner/mplan_search.cpp): where a plan defragmented, the search also
// tries evicting every block but the failing task's inputs first, so that
// those do not go out and come back over PCIe.
//
// ResNet-34 (batch 256) on its H200 profile, one round, at 0.33 of its
// memory: its stem's batch norm backward reads and writes three 784 MiB
// tensors, 2.30 GiB of the 2.32 GiB arena, and fails on fragmentation. With
// moDNN's defragmentation alone (every block out) the plan simulates 214.2
// ms; defragmenting around the task, 157.1 ms (2026-11-30).

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/planner/h200_plan.h"

namespace mplan {
namespace {

// 0.33 of ResNet-34's memory on its H200 profile (the unlimited plan's
// resident region plus its arena peak: 8,346,753,792 bytes), as
// bench/tight_memory_bench.cpp plans it.
constexpr int64_t kBudget = 2754428751;

PlanResult plan_resnet34(bool around_task) {
  PlanOptions o;
  o.defragment_around_task = around_task;
  return testing::plan_one_round_on_the_h200("resnet34", kBudget, o);
}

TEST(Defragmentation, AroundTheTaskKeepsItsInputsWhereThatIsFaster) {
  const PlanResult around = plan_resnet34(true);
  const PlanResult whole = plan_resnet34(false);
  ASSERT_TRUE(around.feasible && whole.feasible);
  std::printf("resnet34, one round at %lld bytes: %.3f ms defragmenting around the task (%s), %.3f ms with moDNN's "
              "defragmentation alone\n",
              static_cast<long long>(kBudget), around.plan.summary.simulated_ms, around.note.c_str(),
              whole.plan.summary.simulated_ms);
  testing::expect_only_the_first_names(around, whole, "defragmenting around the task");
  EXPECT_LT(around.plan.summary.simulated_ms, 0.9 * whole.plan.summary.simulated_ms);
}

}  // namespace
}  // namespace mplan
