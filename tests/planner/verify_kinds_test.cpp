// One planted fault per check of the verifier that the other fault tests
// reach only through a neighbouring check: a step on the wrong stream, a use
// of a buffer not yet allocated, a producer or a BP2 that nothing orders
// before its reader, an offload between two in-place writers (a write racing
// the copy, then a stale copy brought back), a prefetch from a host slot no
// offload filled, and a step that starts before the one before it on its
// stream ends. Each fault is chosen so that its own check must report it
// (scripts/mutation.py leaves each check out in turn).

#include <gtest/gtest.h>

#include <algorithm>

#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::erase_step;
using testing::has_kind;
using testing::move_step;
using testing::Planned;

const Planned& tight() { return testing::tight_cifar_small(); }

std::vector<Violation> verify(const Plan& plan) { return verify_plan(plan, tight().tdfg); }

bool has(const std::vector<Violation>& violations, ViolationKind kind, const std::string& text) {
  return std::any_of(violations.begin(), violations.end(), [&](const Violation& v) {
    return v.kind == kind && v.message.find(text) != std::string::npos;
  });
}

template <typename Pred>
int find_step(const Plan& plan, Pred pred) {
  for (const Step& s : plan.steps)
    if (pred(s)) return s.index;
  return -1;
}

bool uses(const Step& s, BufferId b) {
  if (s.kind == StepKind::offload || s.kind == StepKind::prefetch) return s.buffer == b;
  if (s.kind != StepKind::compute) return false;
  return std::find(s.reads.begin(), s.reads.end(), b) != s.reads.end() ||
         std::find(s.writes.begin(), s.writes.end(), b) != s.writes.end() || s.workspace == b;
}

TEST(VerifyKinds, TheTightPlanIsValid) {
  const auto v = verify(tight().plan);
  EXPECT_TRUE(v.empty()) << describe(v);
}

TEST(VerifyKinds, AnOffloadOnTheComputeStreamIsABadStep) {
  Plan plan = tight().plan;
  const int o = find_step(plan, [](const Step& s) { return s.kind == StepKind::offload; });
  ASSERT_GE(o, 0);
  plan.steps[o].stream = StreamKind::compute;
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::bad_step, "runs on stream compute")) << describe(v);
}

// The allocation of a buffer moved after its first user.
TEST(VerifyKinds, AUseBeforeTheAllocationIsAbsent) {
  Plan plan = tight().plan;
  const Tdfg& tdfg = tight().tdfg;
  int alloc = -1, user = -1;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::alloc || plan.buffers[s.buffer].block == kNoBlock) continue;
    const BlockId block = plan.buffers[s.buffer].block;
    if (block == tdfg.input_block || block == tdfg.labels_block) continue;
    user = find_step(plan, [&](const Step& u) { return u.index > s.index && uses(u, s.buffer); });
    if (user >= 0) {
      alloc = s.index;
      break;
    }
  }
  ASSERT_GE(alloc, 0);
  move_step(plan, static_cast<size_t>(alloc), static_cast<size_t>(user));  // now right after the user
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::absent, "which is not allocated")) << describe(v);
}

// A forward task put on the host-to-device copy stream: its reader on the
// compute stream is not ordered after it by stream order, and no event says so.
TEST(VerifyKinds, AProducerNothingOrdersBeforeItsReaderIsUnproduced) {
  Plan plan = tight().plan;
  const Tdfg& tdfg = tight().tdfg;
  const int fp = find_step(plan, [&](const Step& s) {
    return s.kind == StepKind::compute && !s.recompute && tdfg.tasks[s.task].kind == TaskKind::FP && s.index > 0 &&
           s.records == kNoEvent;
  });
  ASSERT_GE(fp, 0);
  plan.steps[fp].stream = StreamKind::h2d;
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::unproduced, "is not ordered before it")) << describe(v);
}

// The last BP2 put on the device-to-host stream: the update, on the compute
// stream, is not ordered after it.
TEST(VerifyKinds, ABp2NothingOrdersBeforeTheUpdateIsUpdateEarly) {
  Plan plan = tight().plan;
  const Tdfg& tdfg = tight().tdfg;
  int last_bp2 = -1;
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::compute && tdfg.tasks[s.task].kind == TaskKind::BP2) last_bp2 = s.index;
  ASSERT_GE(last_bp2, 0);
  plan.steps[last_bp2].stream = StreamKind::d2h;
  plan.steps[last_bp2].records = kNoEvent;
  for (Step& s : plan.steps)
    s.waits.erase(std::remove(s.waits.begin(), s.waits.end(), tight().plan.steps[last_bp2].records), s.waits.end());
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::update_early, "the update")) << describe(v);
}

// Blocks written twice in place (a ReLU over its convolution's output), one of
// them offloaded after both writes; the offload moved between the two writes.
struct InPlaceOffload {
  int first_write = -1, second_write = -1, offload = -1;
};

InPlaceOffload offload_after_in_place_write(const Plan& plan, const Tdfg& tdfg) {
  for (const Step& o : plan.steps) {
    if (o.kind != StepKind::offload) continue;
    const BlockId block = plan.buffers[o.buffer].block;
    if (block == kNoBlock || tdfg.blocks[block].writers.size() < 2) continue;
    std::vector<int> writes;
    for (int i = 0; i < o.index; ++i) {
      const Step& s = plan.steps[i];
      if (s.kind == StepKind::compute && !s.recompute &&
          std::find(s.writes.begin(), s.writes.end(), o.buffer) != s.writes.end())
        writes.push_back(i);
    }
    if (writes.size() >= 2) return {writes[writes.size() - 2], writes.back(), o.index};
  }
  return {};
}

// The copy reads the buffer while the in-place writer, not ordered after it,
// writes it: a write racing a read on another stream.
TEST(VerifyKinds, AnInPlaceWriteWhileTheOffloadReadsIsAnOverwrite) {
  Plan plan = tight().plan;
  const InPlaceOffload at = offload_after_in_place_write(plan, tight().tdfg);
  ASSERT_GE(at.offload, 0) << "the tight plan should offload the output of an in-place ReLU";
  plan.steps[at.offload].waits.clear();
  move_step(plan, static_cast<size_t>(at.offload), static_cast<size_t>(at.second_write));
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::overwrite, "may still be reading it")) << describe(v);
}

// The host copy holds the content before the second write; the prefetch
// brings it back and the backward task reads that older copy.
TEST(VerifyKinds, ACopyMadeBeforeTheLastWriteIsStale) {
  Plan plan = tight().plan;
  const InPlaceOffload at = offload_after_in_place_write(plan, tight().tdfg);
  ASSERT_GE(at.offload, 0) << "the tight plan should offload the output of an in-place ReLU";
  move_step(plan, static_cast<size_t>(at.offload), static_cast<size_t>(at.second_write));
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::stale, "an older copy")) << describe(v);
}

// The offload that fills a host slot removed: the prefetch copies back
// bytes that nothing wrote.
TEST(VerifyKinds, APrefetchFromAnUnfilledHostSlotIsCopyUnready) {
  Plan plan = tight().plan;
  const int o = find_step(plan, [](const Step& s) { return s.kind == StepKind::offload; });
  ASSERT_GE(o, 0);
  const HostSlotId slot = plan.steps[o].host_slot;
  ASSERT_GE(find_step(plan, [&](const Step& s) { return s.kind == StepKind::prefetch && s.host_slot == slot; }), 0);
  erase_step(plan, static_cast<size_t>(o));
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::copy_unready, "which no offload has filled")) << describe(v);
}

// A compute step that starts before the one before it on the compute stream
// ends; it waits for nothing, so only stream order says it is too early.
TEST(VerifyKinds, AStepStartingBeforeItsStreamIsFreeIsATimingFault) {
  Plan plan = tight().plan;
  int previous = -1, late = -1;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute) continue;
    if (previous >= 0 && s.waits.empty() && plan.steps[previous].end_ms - plan.steps[previous].start_ms > 1e-3) {
      late = s.index;
      break;
    }
    previous = s.index;
  }
  ASSERT_GE(late, 0);
  const double shift = plan.steps[late].start_ms - plan.steps[previous].start_ms;
  plan.steps[late].start_ms -= shift;
  plan.steps[late].end_ms -= shift;
  const auto v = verify(plan);
  EXPECT_TRUE(has(v, ViolationKind::timing, "before the previous step on")) << describe(v);
}

}  // namespace
}  // namespace mplan
