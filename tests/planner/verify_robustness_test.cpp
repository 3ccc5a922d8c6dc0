// The verifier on garbage: random corruptions of a valid plan (fixed seed)
// never crash it, and every id pushed out of range is reported.

#include <gtest/gtest.h>

#include <random>

#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::plan_example;

const testing::Planned& base() {
  static const testing::Planned p = plan_example("cifar_small", 3 * (int64_t{1} << 20));
  return p;
}

TEST(VerifyRobustness, IdsOutOfRangeAreReportedNeverCrash) {
  const Plan& valid = base().plan;
  const Tdfg& tdfg = base().tdfg;
  ASSERT_TRUE(verify_plan(valid, tdfg).empty());
  std::mt19937 rng(20240611);
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  const int32_t buffers = static_cast<int32_t>(valid.buffers.size());
  const int32_t tasks = static_cast<int32_t>(tdfg.tasks.size());
  const int32_t blocks = static_cast<int32_t>(tdfg.blocks.size());
  for (int trial = 0; trial < 600; ++trial) {
    Plan plan = valid;
    Step& step = plan.steps[pick(plan.steps.size())];
    const int32_t far = 1 + static_cast<int32_t>(pick(1000));
    std::string what;
    switch (pick(9)) {
      case 0:
        if (step.kind == StepKind::compute) continue;  // compute steps have no buffer to break
        step.buffer = pick(2) ? buffers + far : -1 - far;
        what = "step buffer";
        break;
      case 1:
        if (step.kind != StepKind::compute) continue;
        step.task = pick(2) ? tasks + far : -1 - far;
        what = "step task";
        break;
      case 2:
        step.waits.push_back(pick(2) ? plan.event_count + far : -1 - far);
        what = "wait";
        break;
      case 3:
        if (step.stream == StreamKind::host) continue;
        step.records = plan.event_count + far;
        what = "records";
        break;
      case 4: {
        Buffer& b = plan.buffers[pick(plan.buffers.size())];
        if (b.block == kNoBlock) continue;
        b.block = blocks + far;
        what = "buffer block";
        break;
      }
      case 5:
        plan.choices[pick(plan.choices.size())].task = tasks + far;
        what = "choice task";
        break;
      case 6:
        if (step.kind != StepKind::compute || step.reads.empty()) continue;
        step.reads[pick(step.reads.size())] = buffers + far;
        what = "read";
        break;
      case 7:
        if (step.kind != StepKind::compute) continue;
        step.round = static_cast<int32_t>(plan.sub_batches.size()) + far;
        what = "compute round";
        break;
      case 8:
        if (step.kind != StepKind::offload && step.kind != StepKind::prefetch) continue;
        step.host_slot = static_cast<int32_t>(plan.host_slots.size()) + far;
        what = "host slot";
        break;
    }
    const std::vector<Violation> v = verify_plan(plan, tdfg);
    EXPECT_FALSE(v.empty()) << "trial " << trial << ": " << what << " out of range went unreported";
  }
}

TEST(VerifyRobustness, ShuffledStepsNeverCrash) {
  const Tdfg& tdfg = base().tdfg;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Plan plan = base().plan;
    std::shuffle(plan.steps.begin(), plan.steps.end(), rng);
    for (size_t i = 0; i < plan.steps.size(); ++i) plan.steps[i].index = static_cast<int32_t>(i);
    EXPECT_FALSE(verify_plan(plan, tdfg).empty());
  }
  Plan empty;
  EXPECT_FALSE(verify_plan(empty, tdfg).empty()) << "an empty plan covers nothing";
}

}  // namespace
}  // namespace mplan
