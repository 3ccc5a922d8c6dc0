// The verifier against planted faults: valid plans from make_plan (K40
// analytic cost model, cifar_small at budgets that force offloading) give no
// violations; each corruption below must be reported with the right kind.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::count_steps;
using testing::describe;
using testing::erase_step;
using testing::has_kind;
using testing::move_step;
using testing::plan_example;
using testing::Planned;

// cifar_small at batch 32 needs 1.1 MiB at moDNN's minimum (mplan bounds); at
// 3 MiB the largest sub-batch that fits is 7, and there the planner offloads,
// prefetches and recomputes (testing::tight_cifar_small: without early drops).
const Planned& tight_plan() { return testing::tight_cifar_small(); }

// A copy of the tight plan to corrupt.
Plan corruptible() { return tight_plan().plan; }

std::vector<Violation> verify(const Plan& plan) { return verify_plan(plan, tight_plan().tdfg); }

// First step index of `kind` satisfying `pred`, or -1.
template <typename Pred>
int find_step(const Plan& plan, StepKind kind, Pred pred) {
  for (const Step& s : plan.steps)
    if (s.kind == kind && pred(s)) return s.index;
  return -1;
}

bool is_input_block(const Tdfg& tdfg, BlockId b) {
  return b == tdfg.input_block || b == tdfg.labels_block;
}

// Whether a compute step after step `from` reads `buffer`.
bool read_later(const Plan& plan, const Step& from, BufferId buffer) {
  for (size_t i = static_cast<size_t>(from.index) + 1; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == StepKind::compute && std::find(s.reads.begin(), s.reads.end(), buffer) != s.reads.end()) return true;
  }
  return false;
}

// The first prefetch of an offloaded block (not input data) whose buffer a compute step then reads.
int used_prefetch(const Plan& plan, const Tdfg& tdfg) {
  return find_step(plan, StepKind::prefetch, [&](const Step& s) {
    return !is_input_block(tdfg, plan.buffers[s.buffer].block) && read_later(plan, s, s.buffer);
  });
}

TEST(VerifyFaults, TightPlanOffloadsAndIsValid) {
  const Plan& plan = tight_plan().plan;
  ASSERT_FALSE(plan.steps.empty());
  EXPECT_GT(plan.summary.offload_count, 0) << "the budget should force offloading";
  EXPECT_GT(count_steps(plan, StepKind::prefetch), 0);
  const auto v = verify(plan);
  EXPECT_TRUE(v.empty()) << describe(v);
}

struct Case {
  const char* model;
  int64_t budget_bytes;
  int copy_engines;
  int64_t sub_batch;
};

TEST(VerifyFaults, ValidPlansHaveNoViolations) {
  const int64_t MiB = int64_t{1} << 20;
  for (const Case& c : {Case{"cifar_small", 2 * MiB, 2, 0}, Case{"cifar_small", 3 * MiB, 1, 0},
                        Case{"cifar_small", 5 * MiB, 2, 0}, Case{"cifar_small", 5 * MiB, 1, 8},
                        Case{"cifar_small", 6 * MiB, 2, 12},  // 32 = 12 + 12 + 8
                        Case{"cifar_small", 64 * MiB, 2, 0}, Case{"every_op", 64 * MiB, 2, 0},
                        Case{"every_op", 64 * MiB, 1, 2}, Case{"every_op_nobn", 64 * MiB, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.model << " budget " << c.budget_bytes << " engines " << c.copy_engines
                                    << " sub-batch " << c.sub_batch);
    Planned p = plan_example(c.model, c.budget_bytes, c.copy_engines, c.sub_batch);
    if (p.plan.steps.empty()) continue;  // plan_example already failed the test
    const auto v = verify_plan(p.plan, p.tdfg);
    EXPECT_TRUE(v.empty()) << describe(v);
  }
}

TEST(VerifyFaults, OffsetMovedOntoALiveBufferIsAnOverlap) {
  Plan plan = corruptible();
  // An alloc while another arena buffer is live at a different offset.
  std::set<BufferId> live;
  bool planted = false;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::free) live.erase(s.buffer);
    if (s.kind != StepKind::alloc) continue;
    for (BufferId other : live) {
      if (plan.buffers[other].offset != plan.buffers[s.buffer].offset &&
          plan.buffers[other].offset + align_up(plan.buffers[s.buffer].bytes) <= plan.arena_bytes) {
        plan.buffers[s.buffer].offset = plan.buffers[other].offset;
        planted = true;
        break;
      }
    }
    if (planted) break;
    live.insert(s.buffer);
  }
  ASSERT_TRUE(planted);
  EXPECT_TRUE(has_kind(verify(plan), ViolationKind::overlap)) << describe(verify(plan));
}

TEST(VerifyFaults, DroppedPrefetchIsAReadBeforeTheBlockIsBack) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  const int p = used_prefetch(plan, tdfg);
  ASSERT_GE(p, 0) << "the tight plan should prefetch an offloaded block";
  erase_step(plan, static_cast<size_t>(p));
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::unprefetched)) << describe(v);
}

TEST(VerifyFaults, DroppedInputLoadIsReported) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  const int p = find_step(plan, StepKind::prefetch,
                          [&](const Step& s) { return plan.buffers[s.buffer].block == tdfg.input_block; });
  ASSERT_GE(p, 0);
  erase_step(plan, static_cast<size_t>(p));
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::unprefetched)) << describe(v);
}

TEST(VerifyFaults, FreeMovedBeforeAReadIsAUseAfterFree) {
  Plan plan = corruptible();
  // A buffer read by a compute step between its alloc and its free.
  std::map<BufferId, int> alloc_at;
  int free_step = -1, target_alloc = -1;
  std::set<BufferId> read_since_alloc;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::alloc) alloc_at[s.buffer] = s.index;
    if (s.kind == StepKind::compute)
      for (BufferId b : s.reads)
        if (alloc_at.count(b)) read_since_alloc.insert(b);
    if (s.kind == StepKind::free && read_since_alloc.count(s.buffer)) {
      free_step = s.index;
      target_alloc = alloc_at[s.buffer];
      break;
    }
  }
  ASSERT_GE(free_step, 0);
  move_step(plan, static_cast<size_t>(free_step), static_cast<size_t>(target_alloc + 1));
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::use_after_free)) << describe(v);
}

TEST(VerifyFaults, DroppedEventWaitIsAReadBeforeThePrefetchEnds) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  // An offloaded block's prefetch P and the first compute step C reading its buffer.
  const int p = used_prefetch(plan, tdfg);
  ASSERT_GE(p, 0);
  const BufferId buffer = plan.steps[p].buffer;
  const int c = find_step(plan, StepKind::compute, [&](const Step& s) {
    return s.index > p && std::find(s.reads.begin(), s.reads.end(), buffer) != s.reads.end();
  });
  ASSERT_GE(c, 0);
  // Drop the waits of the compute steps from P to C: nothing orders C after P then
  // (a step issued before P can only carry events recorded before P).
  for (int i = p; i <= c; ++i)
    if (plan.steps[i].kind == StepKind::compute) plan.steps[i].waits.clear();
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::unprefetched)) << describe(v);
  bool at_c = false;
  for (const Violation& x : v) at_c |= x.step == c && x.kind == ViolationKind::unprefetched;
  EXPECT_TRUE(at_c) << "expected at step " << c << ":\n" << describe(v);
}

TEST(VerifyFaults, ReuseBeforeTheOffloadEndsIsAnOverwrite) {
  Plan plan = corruptible();
  // An offloaded buffer A, freed, whose bytes a later buffer D takes; D's first writer W.
  const int o = find_step(plan, StepKind::offload, [](const Step&) { return true; });
  ASSERT_GE(o, 0);
  const Buffer a = plan.buffers[plan.steps[o].buffer];
  const int f = find_step(plan, StepKind::free, [&](const Step& s) { return s.index > o && s.buffer == a.id; });
  ASSERT_GE(f, 0);
  int w = -1;
  for (int i = f + 1; i < static_cast<int>(plan.steps.size()) && w < 0; ++i) {
    const Step& s = plan.steps[i];
    if (s.kind != StepKind::alloc) continue;
    const Buffer& d = plan.buffers[s.buffer];
    if (d.offset >= a.offset + align_up(a.bytes) || a.offset >= d.offset + align_up(d.bytes)) continue;
    // D's first writer.
    for (int j = i + 1; j < static_cast<int>(plan.steps.size()) && w < 0; ++j) {
      const Step& u = plan.steps[j];
      const bool writes = (u.kind == StepKind::prefetch && u.buffer == d.id) ||
                          (u.kind == StepKind::compute &&
                           (u.workspace == d.id || std::find(u.writes.begin(), u.writes.end(), d.id) != u.writes.end()));
      if (writes) w = j;
    }
  }
  ASSERT_GE(w, 0) << "the tight plan should reuse the memory of an offloaded block";
  // Nothing after the offload waits any more: W is not ordered after it.
  for (int i = o; i <= w; ++i)
    if (plan.steps[i].stream != StreamKind::d2h && plan.steps[i].stream != StreamKind::copy)
      plan.steps[i].waits.clear();
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::overwrite)) << describe(v);
}

TEST(VerifyFaults, UpdateMovedBeforeABp2IsUpdateEarly) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  const int u = find_step(plan, StepKind::compute, [&](const Step& s) { return s.task == tdfg.update_task; });
  ASSERT_GE(u, 0);
  int last_bp2 = -1;
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::compute && tdfg.tasks[s.task].kind == TaskKind::BP2) last_bp2 = s.index;
  ASSERT_GE(last_bp2, 0);
  ASSERT_LT(last_bp2, u);
  move_step(plan, static_cast<size_t>(u), static_cast<size_t>(last_bp2));
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::update_early)) << describe(v);
}

TEST(VerifyFaults, ShrunkBudgetIsReported) {
  Plan plan = corruptible();
  plan.budget_bytes = plan.resident_region_bytes + plan.arena_bytes - 1;
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::budget)) << describe(v);
}

TEST(VerifyFaults, BufferBeyondTheArenaIsReported) {
  Plan plan = corruptible();
  for (Buffer& b : plan.buffers) {
    if (!b.resident) {
      b.offset = plan.arena_bytes;
      break;
    }
  }
  EXPECT_TRUE(has_kind(verify(plan), ViolationKind::budget));
}

TEST(VerifyFaults, ProducerMovedAfterItsReaderIsUnproduced) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  const TaskId conv1 = tdfg.fp_of[0], relu1 = tdfg.fp_of[1];
  const int a = find_step(plan, StepKind::compute, [&](const Step& s) { return s.task == conv1 && s.round == 0; });
  const int b = find_step(plan, StepKind::compute, [&](const Step& s) { return s.task == relu1 && s.round == 0; });
  ASSERT_GE(a, 0);
  ASSERT_GT(b, a);
  move_step(plan, static_cast<size_t>(a), static_cast<size_t>(b));  // FP(conv1) now after FP(relu1)
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::unproduced)) << describe(v);
}

TEST(VerifyFaults, EventFaultsAreReported) {
  {
    Plan plan = corruptible();
    // A second recorder of an event.
    const int r = find_step(plan, StepKind::compute, [](const Step& s) { return s.records == kNoEvent; });
    ASSERT_GE(r, 0);
    EventId used = kNoEvent;
    for (const Step& s : plan.steps)
      if (s.records != kNoEvent) used = s.records;
    ASSERT_NE(used, kNoEvent);
    plan.steps[r].records = used;
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::event));
  }
  {
    Plan plan = corruptible();
    // A wait for an event recorded later.
    const int w = find_step(plan, StepKind::compute, [](const Step&) { return true; });
    plan.steps[w].waits.push_back(plan.event_count - 1);
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::event));
  }
  {
    Plan plan = corruptible();
    plan.event_count += 1;  // never recorded
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::event));
  }
}

TEST(VerifyFaults, CoverageFaultsAreReported) {
  {
    Plan plan = corruptible();
    plan.choices.pop_back();
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::coverage));
  }
  {
    Plan plan = corruptible();
    const int c = find_step(plan, StepKind::compute, [](const Step&) { return true; });
    erase_step(plan, static_cast<size_t>(c));
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::coverage));
  }
  {
    Plan plan = corruptible();
    plan.batch += 1;  // sub-batches no longer sum to the batch
    EXPECT_TRUE(has_kind(verify(plan), ViolationKind::header));
  }
}

TEST(VerifyFaults, EveryViolationIsReportedNotJustTheFirst) {
  Plan plan = corruptible();
  plan.budget_bytes = 0;
  plan.batch += 1;
  plan.choices.pop_back();
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::budget));
  EXPECT_TRUE(has_kind(v, ViolationKind::header));
  EXPECT_TRUE(has_kind(v, ViolationKind::coverage));
  for (const Violation& x : v) EXPECT_FALSE(x.message.empty());
}

TEST(VerifyFaults, MessagesNameTheTaskAndTheBlock) {
  Plan plan = corruptible();
  const Tdfg& tdfg = tight_plan().tdfg;
  const TaskId conv1 = tdfg.fp_of[0], relu1 = tdfg.fp_of[1];
  const int a = find_step(plan, StepKind::compute, [&](const Step& s) { return s.task == conv1 && s.round == 0; });
  const int b = find_step(plan, StepKind::compute, [&](const Step& s) { return s.task == relu1 && s.round == 0; });
  move_step(plan, static_cast<size_t>(a), static_cast<size_t>(b));
  bool named = false;
  for (const Violation& x : verify(plan)) {
    const std::string text = to_string(x);
    named |= x.kind == ViolationKind::unproduced && text.find("FP(relu1)") != std::string::npos &&
             text.find("Y[conv1+relu1]") != std::string::npos;
  }
  EXPECT_TRUE(named) << describe(verify(plan));
}

}  // namespace
}  // namespace mplan
