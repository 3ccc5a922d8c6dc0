// A plan never prefetches a block that it frees before a read
// (planner/prefetch_pruning.h): the defragmentation of a tight plan evicts
// blocks that have just been prefetched, and the pass removes those copies.

#include <gtest/gtest.h>

#include "planner/prefetch_pruning.h"
#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::plan_example;
using testing::Planned;

// cifar_small at 1,138,695 bytes on the K40 (batch 32 as 32 rounds of 1):
// every round defragments the arena in its backward pass, right after
// prefetching Y[conv1+relu1] for pool1's recomputation.
TEST(PrefetchPruning, ATightPlanThatDefragmentsFreesNoPrefetchUnread) {
  const Planned p = plan_example("cifar_small", 1138695);
  ASSERT_GT(p.plan.summary.defragmentation_count, 0) << "the scenario needs defragmentation";
  VerifiedFigures figures;
  const auto v = verify_plan(p.plan, p.tdfg, &figures);
  EXPECT_TRUE(v.empty()) << describe(v);
  EXPECT_EQ(figures.prefetches_freed_unread, 0) << (figures.warnings.empty() ? "" : figures.warnings.front());
}

// The pass on a plan with one unread load planted in it (an alloc, a load
// of round 0's input batch and a free, above the arena's peak, right before
// the round's own load): it removes the three steps and the buffer,
// renumbers what follows, and the plan is the valid one it was before,
// figures and all.
TEST(PrefetchPruning, APlantedUnreadPrefetchIsRemovedAndThePlanIsAsBefore) {
  const Planned p = plan_example("cifar_small", 64 * (int64_t{1} << 20));
  const Plan& before = p.plan;
  ASSERT_TRUE(verify_plan(before, p.tdfg).empty());
  const auto load = std::find_if(before.steps.begin(), before.steps.end(), [&](const Step& s) {
    return s.kind == StepKind::prefetch && before.buffers[static_cast<size_t>(s.buffer)].block == p.tdfg.input_block;
  });
  ASSERT_NE(load, before.steps.end());
  const Buffer& source = before.buffers[static_cast<size_t>(load->buffer)];
  const int64_t at = align_up(before.summary.peak_arena_bytes);
  ASSERT_LE(at + align_up(source.bytes), before.arena_bytes) << "no room above the peak for the planted buffer";
  Plan planted = before;
  const BufferId id = static_cast<BufferId>(planted.buffers.size());
  planted.buffers.push_back(Buffer{id, source.block, kNoTask, source.round, source.bytes, at, false});
  Step alloc, prefetch, free_step;
  alloc.kind = StepKind::alloc;
  alloc.stream = StreamKind::host;
  prefetch.kind = StepKind::prefetch;
  prefetch.stream = load->stream;
  prefetch.host_slot = load->host_slot;
  free_step.kind = StepKind::free;
  free_step.stream = StreamKind::host;
  for (Step* s : {&alloc, &prefetch, &free_step}) {
    s->buffer = id;
    s->round = source.round;
    s->start_ms = s->end_ms = load->start_ms;
  }
  planted.steps.insert(load - before.steps.begin() + planted.steps.begin(), {alloc, prefetch, free_step});
  for (size_t i = 0; i < planted.steps.size(); ++i) planted.steps[i].index = static_cast<int32_t>(i);
  planted.summary.prefetch_count += 1;
  planted.summary.bytes_to_device += source.bytes;
  VerifiedFigures figures;
  verify_plan(planted, p.tdfg, &figures);
  ASSERT_EQ(figures.prefetches_freed_unread, 1) << "the planted prefetch is not unread";

  const PrunedPrefetches pruned = remove_unread_prefetches(planted, p.tdfg);
  EXPECT_EQ(pruned.removed, 1);
  ASSERT_EQ(planted.steps.size(), before.steps.size());
  for (size_t i = 0; i < before.steps.size(); ++i) {
    EXPECT_EQ(planted.steps[i].kind, before.steps[i].kind) << i;
    EXPECT_EQ(planted.steps[i].buffer, before.steps[i].buffer) << i;
    EXPECT_EQ(planted.steps[i].waits, before.steps[i].waits) << i;
  }
  EXPECT_EQ(planted.buffers.size(), before.buffers.size());
  EXPECT_EQ(planted.event_count, before.event_count);
  EXPECT_EQ(planted.summary.prefetch_count, before.summary.prefetch_count);
  EXPECT_EQ(planted.summary.bytes_to_device, before.summary.bytes_to_device);
  EXPECT_EQ(planted.summary.peak_arena_bytes, before.summary.peak_arena_bytes);
  const auto v = verify_plan(planted, p.tdfg, &figures);
  EXPECT_TRUE(v.empty()) << describe(v);
  EXPECT_EQ(figures.prefetches_freed_unread, 0);
}

}  // namespace
}  // namespace mplan
