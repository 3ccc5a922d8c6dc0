// Compaction (planner/deciders/compaction.h): where no free range is long
// enough, moving the blocks that split one on the device competes with the
// offloading scheme, and the cheaper is taken. Table-built scenarios, the
// expected decision first (K = 1 KiB; FakeCost copies take 0.01 ms plus
// copy_ms_per_mb per MB; a task 0.01 ms plus 1 ms per MB it reads and
// writes, so a move of n bytes takes about 2n / 1e6 ms).

#include <gtest/gtest.h>

#include "planner/deciders/compaction.h"
#include "tests/planner/tiny_graph.h"

namespace mplan {
namespace {

using testing::count_steps_of;
using testing::FakeCost;
using testing::simulate_modnn;
using testing::tiny_graph;

constexpr int64_t K = 1024;
constexpr int64_t MiB = 1024 * K;

// T0 makes A (1 MiB), S (256K), G (512K) and R (256K) in a row; T1 reads A,
// G and R and writes C (256 bytes, into X's place at the bottom), then A and
// G die: free are A's 1 MiB, G's 512K (between S and R) and 768K at the top.
// T2 needs E (1.5 MiB), which no range holds:
//   - moving S (not read since it was made, so it may not leave by the
//     offloading scheme, criterion (b)) to the top joins A's and G's ranges:
//     0.53 ms on the compute stream after T1;
//   - evicting R (read by T1, next needed by T4, past the lookahead of one
//     task) joins G's range and the top: its copy to the host starts when T0
//     ends and overlaps T1 (1.85 ms), so T2 waits for what is left of it:
//     0.22 ms at 7.8 ms per MB (a 2.06 ms copy), 0.79 ms at 10 ms per MB.
//   T0: X -> A, S, G, R;  T1: A, G, R -> C;  T2: C -> E;  T3: E -> D;  T4: S, R, D -> F
std::unique_ptr<testing::TinyGraph> split_room() {
  return tiny_graph({{"X", 256}, {"A", MiB}, {"S", 256 * K}, {"G", 512 * K}, {"R", 256 * K}, {"C", 256},
                     {"E", 1536 * K}, {"D", 256}, {"F", 256}},
                    {{"T0", {0}, {1, 2, 3, 4}},
                     {"T1", {1, 3, 4}, {5}},
                     {"T2", {5}, {6}},
                     {"T3", {6}, {7}},
                     {"T4", {2, 4, 7}, {8}}});
}
constexpr int64_t kSplitArena = 2 * MiB + 768 * K + 512;
constexpr BlockId kS = 2, kR = 4;

ModnnRules compaction_rules(bool compaction) {
  ModnnRules r;
  r.lookahead_tasks = 1;
  r.compaction = compaction;
  return r;
}

TEST(Compaction, AMoveOnTheDeviceWhereOffloadingCostsMore) {
  auto g = split_room();
  FakeCost slow_link;
  slow_link.copy_ms_per_mb = 10;
  const PlanResult moved = simulate_modnn(g->tdfg, slow_link, kSplitArena, compaction_rules(true));
  ASSERT_TRUE(moved.feasible) << moved.note;
  EXPECT_EQ(moved.plan.summary.move_count, 1);
  EXPECT_EQ(count_steps_of(moved.plan, StepKind::move, kS), 1);
  EXPECT_EQ(moved.plan.summary.bytes_moved, 256 * K);
  EXPECT_EQ(moved.plan.summary.offload_count, 0);
  EXPECT_EQ(moved.plan.summary.defragmentation_count, 0);
  // The move runs on the compute stream, after T1 and before T2.
  int move = -1;
  for (const Step& s : moved.plan.steps)
    if (s.kind == StepKind::move) move = s.index;
  ASSERT_GE(move, 0);
  EXPECT_EQ(moved.plan.steps[move].stream, StreamKind::compute);
  EXPECT_GT(move, testing::first_step(moved.plan, StepKind::compute, 1));
  EXPECT_LT(move, testing::first_step(moved.plan, StepKind::compute, 2));

  // Without compaction R goes to the host and back.
  const PlanResult copied = simulate_modnn(g->tdfg, slow_link, kSplitArena, compaction_rules(false));
  ASSERT_TRUE(copied.feasible) << copied.note;
  EXPECT_EQ(copied.plan.summary.move_count, 0);
  EXPECT_EQ(count_steps_of(copied.plan, StepKind::offload, kR), 1);
  EXPECT_LT(moved.plan.summary.simulated_ms, copied.plan.summary.simulated_ms);
}

TEST(Compaction, OffloadingWhereItCostsLessThanTheMove) {
  auto g = split_room();
  FakeCost fast_link;  // R's copy holds T2 up 0.22 ms, S's move would 0.53 ms
  fast_link.copy_ms_per_mb = 7.8;
  const PlanResult r = simulate_modnn(g->tdfg, fast_link, kSplitArena, compaction_rules(true));
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.summary.move_count, 0);
  EXPECT_EQ(count_steps_of(r.plan, StepKind::offload, kR), 1);
}

// mplan verify replays every move: the two buffers must hold one block
// instance, and the source its content, ordered before the move.
TEST(Compaction, TheVerifierChecksEveryMove) {
  auto g = split_room();
  FakeCost slow_link;
  slow_link.copy_ms_per_mb = 10;
  const PlanResult moved = simulate_modnn(g->tdfg, slow_link, kSplitArena, compaction_rules(true));
  ASSERT_TRUE(moved.feasible) << moved.note;
  int move = -1;
  for (const Step& s : moved.plan.steps)
    if (s.kind == StepKind::move) move = s.index;
  ASSERT_GE(move, 0);
  auto has = [](const std::vector<Violation>& v, int32_t step, ViolationKind kind) {
    for (const Violation& x : v)
      if (x.step == step && x.kind == kind) return true;
    return false;
  };
  // Into a buffer of another block: R's.
  Plan other = moved.plan;
  Step& into_other = other.steps[static_cast<size_t>(move)];
  for (const Buffer& b : other.buffers)
    if (b.block == kR) into_other.buffer = b.id;
  into_other.writes = {into_other.buffer};
  EXPECT_TRUE(has(verify_plan(other, g->tdfg), move, ViolationKind::bad_step));
  // Backwards: from the new buffer, which nothing has written, into the old one.
  Plan reversed = moved.plan;
  Step& back = reversed.steps[static_cast<size_t>(move)];
  std::swap(back.reads, back.writes);
  back.buffer = back.writes[0];
  EXPECT_TRUE(has(verify_plan(reversed, g->tdfg), move, ViolationKind::copy_unready));
}

// The running task's own input moves: T1 reads A and B (1 MiB each, with
// H's 512K hole between them, H being never read, and 1152K free above) and
// writes E (1.25 MiB). Neither input may leave by the offloading scheme, so
// without compaction T1 fails on fragmentation and everything is evicted
// (moDNN's defragmentation), A and B coming back over the link; moving A to
// the top joins its range and H's, and T1 reads A there.
//   T0: X -> A, H, B;  T1: A, B -> E;  T2: E -> F
TEST(Compaction, TheRunningTasksInputMovesRatherThanEverythingEvicted) {
  auto g = tiny_graph({{"X", 256}, {"A", MiB}, {"H", 512 * K}, {"B", MiB}, {"E", 1280 * K}, {"F", 256}},
                      {{"T0", {0}, {1, 2, 3}}, {"T1", {1, 3}, {4}}, {"T2", {4}, {5}}});
  FakeCost cost;
  const int64_t arena = 2 * MiB + 512 * K + 1152 * K + 512;
  const PlanResult moved = simulate_modnn(g->tdfg, cost, arena, compaction_rules(true));
  ASSERT_TRUE(moved.feasible) << moved.note;
  EXPECT_EQ(count_steps_of(moved.plan, StepKind::move, 1), 1);
  EXPECT_EQ(moved.plan.summary.defragmentation_count, 0);
  EXPECT_EQ(moved.plan.summary.offload_count, 0);
  const PlanResult evicted = simulate_modnn(g->tdfg, cost, arena, compaction_rules(false));
  ASSERT_TRUE(evicted.feasible) << evicted.note;
  EXPECT_EQ(evicted.plan.summary.defragmentation_count, 1);
  EXPECT_LT(moved.plan.summary.simulated_ms, evicted.plan.summary.simulated_ms);
}

// mplan's search plans with compaction by default, and --no-compaction
// (PlanOptions::compaction = false) turns it off.
TEST(Compaction, TheSearchMovesAndTheOptionTurnsItOff) {
  auto g = split_room();
  FakeCost slow_link;
  slow_link.copy_ms_per_mb = 10;
  PlanOptions o;
  o.budget_bytes = kSplitArena;
  o.sub_batch = 1;
  o.prefetch_lookahead_tasks = 1;
  const PlanResult on = plan_iteration(g->tdfg, slow_link, o);
  ASSERT_TRUE(on.feasible) << on.note;
  EXPECT_GE(on.plan.summary.move_count, 1);
  o.compaction = false;
  const PlanResult off = plan_iteration(g->tdfg, slow_link, o);
  ASSERT_TRUE(off.feasible) << off.note;
  EXPECT_EQ(off.plan.summary.move_count, 0);
  EXPECT_LT(on.plan.summary.simulated_ms, off.plan.summary.simulated_ms);
}

}  // namespace
}  // namespace mplan
