// Copies in both directions at once (planner/streams.h): where the GPU's
// offloads and prefetches slow each other down (CostModel::duplex_slowdown,
// measured by the kernel profiler's both-ways copies), a copy that overlaps
// copies of the other direction runs that much slower while they overlap; a
// copy alone, compute, and one shared copy engine are unchanged.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/streams.h"
#include "planner/verify.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

Step copy_step(StepKind kind) {
  Step s;
  s.kind = kind;
  return s;
}

// Issues an h2d copy of h2d_ms at 0, then a d2h copy of d2h_ms with no
// dependency (it starts at 0 too); returns both ends.
std::pair<double, double> ends(double slowdown, double h2d_ms, double d2h_ms, int engines = 2) {
  StreamTimeline t(engines, slowdown);
  const int32_t h2d = t.issue(copy_step(StepKind::prefetch), t.h2d_slot(), h2d_ms, kNoSlotSteps);
  const int32_t d2h = t.issue(copy_step(StepKind::offload), t.d2h_slot(), d2h_ms, kNoSlotSteps);
  return {t.step(h2d).end_ms, t.step(d2h).end_ms};
}

TEST(Duplex, CopiesBothWaysAtOnceRunSlowerWhileTheyOverlap) {
  using Ends = std::pair<double, double>;
  EXPECT_EQ(ends(1.0, 10, 10), Ends(10, 10));  // full duplex: no change
  // Both from 0 at half speed: each does its 10 ms of work by 20. This is the
  // kernel profiler's both-ways measurement the slowdown comes from (equal
  // copies started together end at slowdown x their time alone).
  EXPECT_EQ(ends(2.0, 10, 10), Ends(20, 20));
  EXPECT_EQ(ends(1.2, 10, 10), Ends(12, 12));
  // The h2d copy's 4 ms take 8 shared; the d2h copy then has 6 left alone.
  EXPECT_EQ(ends(2.0, 4, 10), Ends(8, 14));
  // A short copy beside a longer one: 4 ms of work take 5, the longer one's
  // remaining 6 follow alone.
  EXPECT_EQ(ends(1.25, 10, 4), Ends(11, 5));
  // One shared copy engine: the copies queue (FIFO), they never overlap.
  EXPECT_EQ(ends(2.0, 10, 10, /*engines=*/1), Ends(10, 20));
}

TEST(Duplex, ACopyThatAStepAlreadyFollowsKeepsItsEnd) {
  StreamTimeline t(2, 2.0);
  const int32_t h2d = t.issue(copy_step(StepKind::prefetch), t.h2d_slot(), 10, kNoSlotSteps);
  Step compute;
  compute.kind = StepKind::compute;
  const int32_t c = t.issue(compute, kComputeSlot, 1, {-1, h2d, -1});  // waits for the copy: its end is used
  EXPECT_DOUBLE_EQ(t.step(c).start_ms, 10);
  const int32_t d2h = t.issue(copy_step(StepKind::offload), t.d2h_slot(), 10, kNoSlotSteps);
  EXPECT_DOUBLE_EQ(t.step(h2d).end_ms, 10);  // kept
  EXPECT_DOUBLE_EQ(t.step(d2h).end_ms, 15);  // 10 shared do 5 ms of work, 5 alone
}

TEST(Duplex, OnlyTheOverlappingPartOfEachOtherCopyCounts) {
  StreamTimeline t(2, 2.0);
  Step compute;
  compute.kind = StepKind::compute;
  const int32_t c = t.issue(compute, kComputeSlot, 6, kNoSlotSteps);
  // h2d copies at [0, 2) and, after the compute, [6, 8).
  t.issue(copy_step(StepKind::prefetch), t.h2d_slot(), 2, kNoSlotSteps);
  const int32_t second = t.issue(copy_step(StepKind::prefetch), t.h2d_slot(), 2, {c, -1, -1});
  EXPECT_DOUBLE_EQ(t.step(c).end_ms, 6);  // compute is not slowed
  // A d2h copy of 6 ms from 0: [0, 2) beside the first h2d copy, which the
  // second follows (it keeps its end): 1 ms of work; [2, 6) alone: 4 ms;
  // from 6 beside the second h2d copy, nothing after it yet: the last 1 ms
  // takes 2 and the h2d copy's 2 ms end at 6 + 2 + 1 = 9.
  const int32_t d2h = t.issue(copy_step(StepKind::offload), t.d2h_slot(), 6, kNoSlotSteps);
  EXPECT_DOUBLE_EQ(t.step(d2h).start_ms, 0);
  EXPECT_DOUBLE_EQ(t.step(d2h).end_ms, 8);
  EXPECT_DOUBLE_EQ(t.step(second).end_ms, 9);
  EXPECT_DOUBLE_EQ(t.free_at_ms(t.h2d_slot()), 9);
  // The next h2d copy queues behind it, alone.
  const int32_t h2d = t.issue(copy_step(StepKind::prefetch), t.h2d_slot(), 3, kNoSlotSteps);
  EXPECT_DOUBLE_EQ(t.step(h2d).start_ms, 9);
  EXPECT_DOUBLE_EQ(t.step(h2d).end_ms, 12);
}

// The plan whose offloads and prefetches overlap: ResNet-50 at 6 GiB from the
// H200's measured profile (docs/gpu-validation.md: the one plan measured 17-21%
// over its simulation; its copies of the two directions overlap for 11.5 ms).
// With a slowdown its copies take longer than alone where the two directions
// overlap, never more than the slowdown allows, the plan says so, and it
// still verifies.
TEST(Duplex, PlansPriceOverlappingCopiesAndStillVerify) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/resnet50.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  const std::string file = std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/resnet50-h200.json";
  Result<Profile> profile = load_profile(file);
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  PlanOptions options;
  options.budget_bytes = int64_t{6} << 30;
  options.early_drops = false;  // as the measured plan was made: with them it copies less, never both ways at once
  int stretched = 0;
  for (double slowdown : {1.0, 1.5}) {
    SCOPED_TRACE(slowdown);
    profile->duplex_slowdown = slowdown;
    auto cost = RecordedCostModel::create(*profile, tdfg, {}, file);
    ASSERT_TRUE(cost.ok()) << cost.error().to_string();
    Result<Plan> plan = plan_iteration(tdfg, **cost, options).take_plan();
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    ASSERT_GT(plan->summary.bytes_to_host, 0) << "the scenario needs copies both ways";
    ASSERT_GT(plan->summary.bytes_to_device, 0) << "the scenario needs copies both ways";
    EXPECT_TRUE(verify_plan(*plan, tdfg).empty());
    const bool noted = std::any_of(plan->summary.notes.begin(), plan->summary.notes.end(), [](const std::string& n) {
      return n.find("copies of the two directions overlap for") != std::string::npos &&
             n.find("priced 1.50x slower while they do") != std::string::npos;
    });
    EXPECT_EQ(noted, slowdown > 1.0);
    for (const Step& s : plan->steps) {
      if (s.kind != StepKind::offload && s.kind != StepKind::prefetch) continue;
      const int64_t bytes = plan->buffers[s.buffer].bytes;
      const double alone =
          s.kind == StepKind::offload ? (*cost)->device_to_host_ms(bytes) : (*cost)->host_to_device_ms(bytes);
      const double took = s.end_ms - s.start_ms;
      EXPECT_GE(took, alone * (1 - 1e-9));
      EXPECT_LE(took, alone * slowdown * (1 + 1e-9));
      if (slowdown == 1.0) {
        EXPECT_NEAR(took, alone, 1e-9 * alone);
      }
      if (slowdown > 1.0 && took > alone * (1 + 1e-6)) ++stretched;
    }
  }
  EXPECT_GT(stretched, 0) << "no copy overlapped one of the other direction: the scenario checks nothing";
  // At 7 GiB the plan copies both ways but never at once: no note.
  options.budget_bytes = int64_t{7} << 30;
  auto cost = RecordedCostModel::create(*profile, tdfg, {}, file);
  ASSERT_TRUE(cost.ok());
  Result<Plan> apart = plan_iteration(tdfg, **cost, options).take_plan();
  ASSERT_TRUE(apart.ok()) << apart.error().to_string();
  ASSERT_GT(apart->summary.bytes_to_host, 0);
  ASSERT_GT(apart->summary.bytes_to_device, 0);
  for (const std::string& note : apart->summary.notes)
    EXPECT_EQ(note.find("copies of the two directions overlap"), std::string::npos) << note;
}

}  // namespace
}  // namespace mplan
