// The verifier against hostile plans (docs/robustness.md): figures
// near INT64_MAX that wrapped into small ones, summary figures the steps do not
// give, a header that no longer matches the model, and host slots that share
// host bytes so that an offload overwrites a copy still to be read. Each of
// these passed as "plan OK" before; each must now be reported, and none may
// make the verifier allocate beyond what the plan holds.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "planner/plan_limits.h"
#include "planner/verify.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::describe;
using testing::has_kind;
using testing::Planned;

// The tight plan offloads and prefetches (verify_plans.h). Left to choose,
// the planner runs 6 sub-batches there and offloads nothing: on a busy
// stream the K40's tiny tasks cost their host work, whatever their size, so
// one more sub-batch costs less than copies.
const Planned& tight() { return testing::tight_cifar_small(); }

std::vector<Violation> verify(const Plan& plan) { return verify_plan(plan, tight().tdfg); }

bool mentions(const std::vector<Violation>& violations, const std::string& text) {
  for (const Violation& v : violations)
    if (v.message.find(text) != std::string::npos) return true;
  return false;
}

TEST(VerifyHostile, TheTightPlanIsValidAndItsFiguresAreRecomputed) {
  VerifiedFigures figures;
  const auto v = verify_plan(tight().plan, tight().tdfg, &figures);
  ASSERT_TRUE(v.empty()) << describe(v);
  const PlanSummary& s = tight().plan.summary;
  EXPECT_GT(s.offload_count, 0);
  EXPECT_EQ(figures.peak_arena_bytes, s.peak_arena_bytes);
  EXPECT_EQ(figures.offload_count, s.offload_count);
  EXPECT_EQ(figures.bytes_to_host, s.bytes_to_host);
  EXPECT_EQ(figures.load_count, s.prefetch_count + s.input_load_count);
  EXPECT_DOUBLE_EQ(figures.simulated_ms, s.simulated_ms);
}

// Item 11: resident region + arena near INT64_MAX wrapped negative and passed.
TEST(VerifyHostile, ArenaNearInt64MaxIsOverTheBudget) {
  Plan plan = tight().plan;
  plan.arena_bytes = std::numeric_limits<int64_t>::max() - 100;
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::budget)) << describe(v);
  EXPECT_TRUE(mentions(v, "overflows int64")) << describe(v);
}

TEST(VerifyHostile, BufferRangesThatOverflowAreReported) {
  Plan plan = tight().plan;
  plan.arena_bytes = std::numeric_limits<int64_t>::max() / 2;
  plan.budget_bytes = plan.resident_region_bytes + plan.arena_bytes;
  // An arena buffer whose end wraps: offset + aligned bytes > INT64_MAX.
  for (Buffer& b : plan.buffers) {
    if (b.resident) continue;
    b.offset = std::numeric_limits<int64_t>::max() - 255;
    b.offset -= b.offset % kPlanAlignmentBytes;
    break;
  }
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::budget)) << describe(v);
  EXPECT_TRUE(mentions(v, "overflows int64") || mentions(v, "beyond its arena region")) << describe(v);
}

TEST(VerifyHostile, BlockSizeAtAHugeSubBatchDoesNotOverflow) {
  Plan plan = tight().plan;
  plan.sub_batches = {std::numeric_limits<int64_t>::max() / 2, 3};
  const auto v = verify(plan);  // UBSan would flag a wrapped bytes_per_sample * b
  EXPECT_TRUE(has_kind(v, ViolationKind::header)) << describe(v);
}

// Item 11: the summary's figures are recomputed, never taken from the file.
TEST(VerifyHostile, EverySummaryFigureIsCheckedAgainstTheSteps) {
  struct Edit {
    const char* field;
    void (*apply)(PlanSummary&);
  };
  const Edit edits[] = {
      {"peak_arena_bytes", [](PlanSummary& s) { s.peak_arena_bytes /= 2; }},
      {"peak_live_bytes", [](PlanSummary& s) { s.peak_live_bytes = 1; }},
      {"fragmentation", [](PlanSummary& s) { s.fragmentation += 0.5; }},
      {"offload_count", [](PlanSummary& s) { s.offload_count += 1; }},
      {"bytes_to_host", [](PlanSummary& s) { s.bytes_to_host -= 256; }},
      {"prefetch_count", [](PlanSummary& s) { s.prefetch_count += 3; }},
      {"bytes_to_device", [](PlanSummary& s) { s.bytes_to_device += 1; }},
      {"simulated_ms", [](PlanSummary& s) { s.simulated_ms *= 0.5; }},
      {"stall_ms", [](PlanSummary& s) { s.stall_ms += 1.0; }},
      {"ideal_ms", [](PlanSummary& s) { s.ideal_ms = std::nan(""); }},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.field);
    Plan plan = tight().plan;
    e.apply(plan.summary);
    const auto v = verify(plan);
    EXPECT_TRUE(mentions(v, std::string("summary.") + e.field) ||
                mentions(v, std::string(e.field) + " is") || mentions(v, e.field))
        << describe(v);
    EXPECT_FALSE(v.empty());
  }
}

// Item 11b: metadata that no longer matches the model.
TEST(VerifyHostile, HeaderFiguresAreCheckedAgainstTheModel) {
  struct Edit {
    const char* expect;
    void (*apply)(Plan&);
  };
  const Edit edits[] = {
      {"task_names[", [](Plan& p) { std::swap(p.task_names[1], p.task_names[2]); }},
      {"block_names[", [](Plan& p) { std::swap(p.block_names[3], p.block_names[4]); }},
      {"model_name", [](Plan& p) { p.model_name = "resnet50"; }},
      {"model_digest", [](Plan& p) { p.model_digest = "0123456789abcdef"; }},
      {"resident_bytes", [](Plan& p) { p.resident_bytes += 4; }},
      {"arena_bytes is", [](Plan& p) { p.arena_bytes -= 4 * kPlanAlignmentBytes; }},
      {"host_bytes", [](Plan& p) { p.host_bytes += 1 << 20; }},
      {"budget_bytes", [](Plan& p) { p.budget_bytes = -5; }},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.expect);
    Plan plan = tight().plan;
    e.apply(plan);
    const auto v = verify(plan);
    EXPECT_TRUE(has_kind(v, ViolationKind::header) || has_kind(v, ViolationKind::budget)) << describe(v);
    EXPECT_TRUE(mentions(v, e.expect)) << describe(v);
  }
}

// Item 11b: two host slots sharing host bytes. Slot `victim` is offloaded,
// then an offload into `intruder` (moved onto the victim's bytes) overwrites
// it before the victim's prefetch: the backward task would compute from
// another block's data.
TEST(VerifyHostile, AnOffloadOverwritingAHostCopyStillToBeReadIsReported) {
  const Plan& base = tight().plan;
  const auto [offload, prefetch] = testing::slot_copies(base);
  HostSlotId victim = kNoHostSlot, intruder = kNoHostSlot;
  for (size_t a = 0; a < base.host_slots.size() && victim == kNoHostSlot; ++a)
    for (size_t b = 0; b < base.host_slots.size(); ++b)
      if (a != b && offload[a] >= 0 && prefetch[a] > offload[a] && offload[b] > offload[a] &&
          offload[b] < prefetch[a] &&
          base.host_slots[a].host_offset + base.host_slots[b].bytes <= base.host_bytes) {
        victim = static_cast<HostSlotId>(a);
        intruder = static_cast<HostSlotId>(b);
        break;
      }
  ASSERT_NE(victim, kNoHostSlot) << "the tight plan should offload two blocks before prefetching the first";
  Plan plan = base;
  plan.host_slots[intruder].host_offset = plan.host_slots[victim].host_offset;
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::copy_unready)) << describe(v);
  EXPECT_TRUE(mentions(v, "shares them")) << describe(v);
}

// Slots may share host bytes over time, as arena buffers do: a slot reused
// after its copy was read back is fine.
TEST(VerifyHostile, HostBytesReusedAfterTheCopyWasReadAreFine) {
  const Plan& base = tight().plan;
  const auto [offload, prefetch] = testing::slot_copies(base);
  // A slot whose every use comes after another slot's last prefetch, by a wide
  // margin in issue order; the copy engine runs in order, so the reads are done.
  for (size_t a = 0; a < base.host_slots.size(); ++a)
    for (size_t b = 0; b < base.host_slots.size(); ++b) {
      if (a == b || offload[a] < 0 || prefetch[a] < 0 || offload[b] <= prefetch[a]) continue;
      // Within a's bytes, so that b shares no other slot's.
      if (base.host_slots[b].bytes > base.host_slots[a].bytes) continue;
      Plan plan = base;
      plan.host_slots[b].host_offset = plan.host_slots[a].host_offset;
      std::vector<Violation> v = verify(plan);
      // Only ordering may be in question (the d2h offload not ordered after the h2d prefetch).
      for (const Violation& x : v) EXPECT_EQ(x.kind, ViolationKind::overwrite) << describe(v);
      return;
    }
  GTEST_SKIP() << "no slot of the tight plan is offloaded after another's last prefetch";
}

// Write after read on the host: a prefetch is still copying slot `victim`
// back (on the host-to-device engine) when an offload into `intruder`, moved
// onto the victim's bytes, starts writing them (on the other engine). Nothing
// orders the two copies, so the prefetch may read the intruder's bytes.
TEST(VerifyHostile, AnOffloadOverwritingHostBytesAPrefetchIsStillReadingIsReported) {
  const Plan& base = tight().plan;
  const auto [offload, prefetch] = testing::slot_copies(base);
  int tried = 0;
  for (size_t a = 0; a < base.host_slots.size(); ++a)
    for (size_t b = 0; b < base.host_slots.size(); ++b) {
      if (a == b || prefetch[a] < 0 || offload[b] <= prefetch[a]) continue;
      // Issued after the prefetch but started before it ends: the two copies overlap in
      // simulated time, which a valid plan allows only for copies no event orders.
      if (base.steps[offload[b]].start_ms >= base.steps[prefetch[a]].end_ms) continue;
      if (base.host_slots[a].host_offset + base.host_slots[b].bytes > base.host_bytes) continue;
      Plan plan = base;
      plan.host_slots[b].host_offset = plan.host_slots[a].host_offset;
      const auto v = verify(plan);
      EXPECT_TRUE(has_kind(v, ViolationKind::overwrite)) << "slots " << a << ", " << b << ": " << describe(v);
      EXPECT_TRUE(mentions(v, "may still read them")) << "slots " << a << ", " << b << ": " << describe(v);
      ++tried;
    }
  ASSERT_GT(tried, 0) << "the tight plan should offload a block while it prefetches another";
}

TEST(VerifyHostile, InputSlotsSharingHostBytesAreReported) {
  Plan plan = tight().plan;
  std::vector<HostSlotId> inputs;
  for (const HostSlot& h : plan.host_slots)
    if (h.block == tight().tdfg.input_block || h.block == tight().tdfg.labels_block) inputs.push_back(h.id);
  ASSERT_GE(inputs.size(), 2u);
  plan.host_slots[inputs[1]].host_offset = plan.host_slots[inputs[0]].host_offset;
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::overlap)) << describe(v);
}

TEST(VerifyHostile, NanTimesAreReported) {
  Plan plan = tight().plan;
  plan.steps[3].start_ms = std::nan("");
  const auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::timing)) << describe(v);
}

// Item 9: a plan's counts bound what the verifier allocates.
TEST(VerifyHostile, HugeCountsAreRefusedWithoutAllocatingForThem) {
  Plan plan = tight().plan;
  plan.event_count = 2000000000;
  auto v = verify(plan);
  EXPECT_TRUE(has_kind(v, ViolationKind::event)) << describe(v);
  EXPECT_TRUE(mentions(v, "more than the")) << describe(v);

  plan = tight().plan;
  plan.sub_batches.assign(static_cast<size_t>(kMaxRounds) + 1, 1);
  plan.batch = kMaxRounds + 1;
  v = verify(plan);
  EXPECT_TRUE(mentions(v, "rounds")) << describe(v);
}

}  // namespace
}  // namespace mplan
