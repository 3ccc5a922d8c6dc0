// One scenario per heuristic of moDNN's decider and mplan's levers
// (planner/deciders/), on tiny table-built graphs with the expected decision
// written first. scripts/mutation.sh breaks each heuristic in turn; one of
// these tests must then fail.
//
// Sizes: K = 1 KiB of 256-byte units; copies take 0.01 ms + 1 ms per MB
// (FakeCost); task times are set per test.

#include <gtest/gtest.h>

#include "tests/planner/tiny_graph.h"

namespace mplan {
namespace {

using testing::FakeCost;
using testing::first_step;
using testing::simulate_modnn;
using testing::tiny_graph;
using testing::TinyTask;

constexpr int64_t K = 1024;
constexpr int64_t MiB = 1024 * K;

// The graph of testing::offload_then_reuse (tests/planner/tiny_graph.h).
using testing::offload_then_reuse;

TEST(Eq4Prefetch, StartsWhenWaitingWouldDelayTheTask) {
  // Expected: offload A before T2 writes C; A's prefetch is issued with T3
  // (Algorithm 1 line 19: T3's end + A's 0.53 ms copy > EST(T4) = T3's end),
  // so it comes before T3's compute step in issue order and overlaps T3's 1 ms.
  auto g = offload_then_reuse(0);
  FakeCost cost;
  cost.table["T3"] = {TaskOption{"default", 1.0, 0}};
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB + 512, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  const Plan& p = r.plan;
  const int offload = first_step(p, StepKind::offload, /*A=*/1);
  const int prefetch = first_step(p, StepKind::prefetch, 1);
  const int t3 = first_step(p, StepKind::compute, /*T3=*/3);
  const int t4 = first_step(p, StepKind::compute, 4);
  ASSERT_GE(offload, 0);
  ASSERT_GE(prefetch, 0);
  EXPECT_LT(prefetch, t3) << "A must be prefetched ahead of T4, with T3";
  EXPECT_LE(p.steps[prefetch].end_ms, p.steps[t4].start_ms + 1e-9);
  EXPECT_NEAR(p.steps[t4].start_ms, p.steps[t3].end_ms, 1e-9) << "T4 does not stall";
}

TEST(Eq4Prefetch, WaitsWhileStartingLaterIsEarlyEnough) {
  // Three 2 ms tasks between C and T3: after T3a the copy (0.53 ms) still has
  // 6 ms of slack, after T3b 4 ms, after T3c 2 ms; it must start only with T3,
  // the last task before T4 (T + Talg + Ttrans > EST only there).
  auto g = offload_then_reuse(3);
  FakeCost cost;
  for (const char* t : {"T3a", "T3b", "T3c", "T3"}) cost.table[t] = {TaskOption{"default", 2.0, 0}};
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB + 512 + 1024, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  const Plan& p = r.plan;
  const int prefetch = first_step(p, StepKind::prefetch, 1);
  ASSERT_GE(prefetch, 0);
  const TaskId t3c = 5, t3 = 6;
  EXPECT_GT(prefetch, first_step(p, StepKind::compute, t3c)) << "too early: Eq. 4 says wait";
  EXPECT_LT(prefetch, first_step(p, StepKind::compute, t3)) << "too late: T4 would stall";
}

TEST(Eq4Prefetch, OnDemandWhenPrefetchingIsOff) {
  // The same graph without lines 15-27: A is loaded when T4 needs it, after T3's step.
  auto g = offload_then_reuse(0);
  FakeCost cost;
  cost.table["T3"] = {TaskOption{"default", 1.0, 0}};
  ModnnRules rules = testing::published_rules();
  rules.prefetch = false;
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB + 512, rules);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_GT(first_step(r.plan, StepKind::prefetch, 1), first_step(r.plan, StepKind::compute, 3));
}

// ---- Eq. 5: algorithm choice (Algorithm 1 lines 9-14) ----------------------

// V (1 MiB) is made first and read again by T2; T1 is a conv-like task:
//   X -T0-> V -T0b-> A(256K) -T1-> B(256K); T2 reads B and V.
// Arena 1.5 MiB + 1K: at T1, V, A and B fill it; the fast option's 1 MiB of
// workspace needs V offloaded, which delays T1 by V's copy (1.06 ms, Fig. 3)
// less the 0.01 ms of T0b it overlaps.
std::unique_ptr<testing::TinyGraph> workspace_displaces_a_block() {
  return tiny_graph({{"X", 256}, {"V", MiB}, {"A", 256 * K}, {"B", 256 * K}, {"C", 256}},
                    {{"T0", {0}, {1}}, {"T0b", {1}, {2}}, {"T1", {2}, {3}, TaskKind::FP, /*algorithms=*/true},
                     {"T2", {3, 1}, {4}}});
}

TEST(Eq5, TheOffloadAFastAlgorithmForcesCountsAgainstIt) {
  // gain(fast) = T_lean - T_fast - T_off = 1.5 - 1.0 - 1.05 < 0 = gain(lean): lean.
  auto g = workspace_displaces_a_block();
  FakeCost cost;
  cost.table["T0b"] = {TaskOption{"default", 0.01, 0}};  // too short to hide V's copy
  cost.table["T1"] = {TaskOption{"fast", 1.0, MiB}, TaskOption{"lean", 1.5, 0}};
  PlanResult r = simulate_modnn(g->tdfg, cost, MiB + 512 * K + K, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.choices[2].algorithm, "lean");
  EXPECT_EQ(r.plan.summary.offload_count, 0);
  // With a slower lean option (3 ms) the gain is 2 - 1.05 > 0: fast, and V goes to the host.
  cost.table["T1"] = {TaskOption{"fast", 1.0, MiB}, TaskOption{"lean", 3.0, 0}};
  r = simulate_modnn(g->tdfg, cost, MiB + 512 * K + K, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.choices[2].algorithm, "fast");
  EXPECT_NEAR(r.plan.choices[2].gain_ms, 2.0 - (cost.device_to_host_ms(MiB) - 0.01), 1e-9);
  EXPECT_EQ(r.plan.summary.offload_count, 1);
}

TEST(Eq5, AFastAlgorithmWhoseWorkspaceDelaysAPrefetchIsRejected) {
  // offload_then_reuse with T3 conv-like: A (offloaded at T2) must come back
  // for T4 during T3. The fast option's 1 MiB workspace leaves 512 bytes, less
  // than A, so A's copy (0.53 ms) waits for T3 and delays T4 by all of it:
  // gain(fast) = 1.3 - 1.0 - 0.53 < 0 -> lean; with lean at 2 ms, fast.
  auto g = offload_then_reuse(0);
  g->tdfg.tasks[3].has_algorithms = true;
  g->tdfg.tasks[3].recompute_reads.clear();
  g->tdfg.tasks[3].recompute_writes.clear();
  FakeCost cost;
  cost.table["T3"] = {TaskOption{"fast", 1.0, MiB}, TaskOption{"lean", 1.3, 0}};
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB + 512, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.choices[3].algorithm, "lean");
  cost.table["T3"] = {TaskOption{"fast", 1.0, MiB}, TaskOption{"lean", 2.0, 0}};
  r = simulate_modnn(g->tdfg, cost, 2 * MiB + 512, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.choices[3].algorithm, "fast");
}

// ---- §IV-B.1: which blocks may leave ------------------------------------------

// Two candidates for one allocation. T0 makes A (512K), Z (768K) and Q (384K)
// in that order, above the input X; T1 reads all three (Z then dies) and
// writes B where X was. The arena (1920K + 256) then holds
//   B | A | free (Z's 768K) | Q | free (256K)
// and T2's C (1.25 MiB) fits neither hole: a scheme takes A (A + the hole
// above it) or Q (the hole below it + Q + the top). T3 needs A again at once;
// Q only after 70 more tasks (T4).
std::unique_ptr<testing::TinyGraph> two_candidates(bool t1_reads_a = true) {
  std::vector<std::pair<std::string, int64_t>> blocks = {{"X", 256}, {"A", 512 * K}, {"Z", 768 * K}, {"Q", 384 * K},
                                                         {"B", 256},  {"C", 1280 * K}, {"D", 256}};
  std::vector<TinyTask> tasks = {{"T0", {0}, {1, 2, 3}},
                                 {"T1", t1_reads_a ? std::vector<BlockId>{1, 2, 3} : std::vector<BlockId>{2, 3}, {4}},
                                 {"T2", {4}, {5}},
                                 {"T3", {1, 5}, {6}}};
  BlockId last = 6;
  for (int i = 0; i < 70; ++i) {
    blocks.push_back({"F" + std::to_string(i), 256});
    tasks.push_back({"F" + std::to_string(i), {last}, {static_cast<BlockId>(blocks.size() - 1)}});
    last = static_cast<BlockId>(blocks.size() - 1);
  }
  blocks.push_back({"E", 256});
  tasks.push_back({"T4", {3, last}, {static_cast<BlockId>(blocks.size() - 1)}});
  return tiny_graph(blocks, tasks);
}
constexpr int64_t kTwoCandidatesArena = 1920 * K + 256;
constexpr BlockId kA = 1, kQ = 3;

// Criterion (b). T0 makes B (256), A (512K), Z (768K) and Q (384K), in that
// order above X; T1 reads Z and Q (not A) and writes D1 where X was. Before T1
// the script evicts A and loads it back into its old place (while T1 runs):
//   D1 | B | A | free (Z's 768K) | Q | free (256K)
// T2 (reading B and D1) needs C (1.25 MiB): A (A + the hole) or Q (the hole +
// Q + the top) must go. A has a current host copy and costs nothing; Q costs
// its copy (0.40 ms). But A has not been used since it arrived: criterion (b)
// forbids it, so Q goes and A stays for T3.
TEST(Criteria, ABlockNotUsedSinceItArrivedStays) {
  std::vector<std::pair<std::string, int64_t>> blocks = {{"X", 256},   {"B", 256},  {"A", 512 * K},
                                                         {"Z", 768 * K}, {"Q", 384 * K}, {"D1", 256},
                                                         {"C", 1280 * K}, {"D", 256}};
  std::vector<TinyTask> tasks = {{"T0", {0}, {1, 2, 3, 4}}, {"T1", {3, 4}, {5}}, {"T2", {1, 5}, {6}},
                                 {"T3", {2, 6}, {7}}};
  BlockId last = 7;
  for (int i = 0; i < 70; ++i) {
    blocks.push_back({"F" + std::to_string(i), 256});
    tasks.push_back({"F" + std::to_string(i), {last}, {static_cast<BlockId>(blocks.size() - 1)}});
    last = static_cast<BlockId>(blocks.size() - 1);
  }
  blocks.push_back({"E", 256});
  tasks.push_back({"T4", {4, last}, {static_cast<BlockId>(blocks.size() - 1)}});
  auto g = tiny_graph(blocks, tasks);
  FakeCost cost;
  testing::ScriptedDecider decider(make_modnn_decider(testing::published_rules()));
  decider.before[1] = [](IterationSim& sim) {
    const int32_t a = sim.instance(0, 2);
    sim.evict(a);
    sim.load(a, RoomRequest{sim.instance_bytes(a), kH2dSlot, sim.here(), RoomRequest::Purpose::prefetch});
  };
  PlanResult r = testing::simulate_with(g->tdfg, cost, 1920 * K + 512, decider);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*A=*/2), 1) << "A must not leave again";
  EXPECT_LT(first_step(r.plan, StepKind::offload, /*Q=*/4), first_step(r.plan, StepKind::compute, 2));
}

TEST(Criteria, ABlockTheRunningTaskNeedsStays) {
  // Criterion (a): a scheme for T3's room never takes T3's own inputs, nor,
  // for a prefetch for a later task s, blocks needed up to s. At T2, C's
  // allocation may not take B (T2 reads it): the scheme's victims are A or Q only.
  auto g = two_candidates();
  FakeCost cost;
  testing::ScriptedDecider decider(make_modnn_decider(testing::published_rules()));
  PlanResult r = testing::simulate_with(g->tdfg, cost, kTwoCandidatesArena, decider);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*B=*/4), 0);
  EXPECT_EQ(r.plan.summary.offload_count, 1);
}

// ---- Algorithm 1 line 16: no useless prefetch -----------------------------------

TEST(Line16, NoPrefetchWhenTheNextTaskWouldNotFitBesideTheRunningOne) {
  // offload_then_reuse in an arena of 2 MiB: with T3 running (C and D, 1 MiB)
  // T4's need (D, A, E: 1 MiB + 256) is predicted not to fit beside it, so A
  // is not prefetched with T3 but loaded when T4 needs it. (The input X at the
  // bottom also makes T1 reload A, which T1 reads: that first load is not
  // the one checked.)
  auto g = offload_then_reuse(0);
  FakeCost cost;
  cost.table["T3"] = {TaskOption{"default", 1.0, 0}};
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_GT(testing::last_step(r.plan, StepKind::prefetch, 1), first_step(r.plan, StepKind::compute, 3));
}

// ---- mplan: re-fetch cost (the prefetch-thrash fix) ----------------------------

// two_candidates, and before T1 the script copies A to the host (A stays, and
// T1's 1.2 ms hides the copy): A is then free to evict, Q costs its copy, or
// what T1 does not hide of it. But T3 needs A right
// away: with the re-fetch cost A costs its copy back (0.53 ms) and Q goes;
// without it A looks free and goes, and comes back for T3 (the thrash).
TEST(RefetchCost, AVictimNeededSoonCostsItsCopyBack) {
  auto g = two_candidates();
  FakeCost cost;
  for (bool refetch : {true, false}) {
    ModnnRules rules = testing::published_rules();
    rules.refetch_cost = refetch;
    testing::ScriptedDecider decider(make_modnn_decider(rules));
    decider.before[1] = [](IterationSim& sim) { sim.offload(sim.instance(0, kA)); };
    PlanResult r = testing::simulate_with(g->tdfg, cost, kTwoCandidatesArena, decider);
    ASSERT_TRUE(r.feasible) << r.note;
    SCOPED_TRACE(refetch ? "with the re-fetch cost" : "without");
    EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, kA), refetch ? 0 : 1);
    // With the cost, Q leaves to make room for T2 (its copy issued before T2 runs).
    const int q = first_step(r.plan, StepKind::offload, kQ);
    if (refetch) EXPECT_LT(q, first_step(r.plan, StepKind::compute, 2));
    else EXPECT_TRUE(q < 0 || q > first_step(r.plan, StepKind::compute, 2));
  }
}

// workspace_displaces_a_block with lean at 3 ms: T2 reads V right after T1,
// so offloading V for the fast option's workspace costs its copy now (1.05 ms
// not hidden) and, with the re-fetch cost, its copy back (1.05 ms). Eq. 5
// with that cost in T_off: gain(fast) = 3 - 1 - 1.04 - 1.05 < 0 = gain(lean):
// lean. T_off as published (the delay alone; the search's variant
// ModnnRules::eq5_refetch = false): 2 - 1.04 > 0, fast.
TEST(RefetchCost, Eq5CountsItOnlyWhenAsked) {
  auto g = workspace_displaces_a_block();
  FakeCost cost;
  cost.table["T0b"] = {TaskOption{"default", 0.01, 0}};
  cost.table["T1"] = {TaskOption{"fast", 1.0, MiB}, TaskOption{"lean", 3.0, 0}};
  for (bool eq5_refetch : {true, false}) {
    SCOPED_TRACE(eq5_refetch ? "T_off with the re-fetch" : "T_off as published");
    ModnnRules rules = testing::published_rules();
    rules.refetch_cost = true;
    rules.eq5_refetch = eq5_refetch;
    PlanResult r = simulate_modnn(g->tdfg, cost, MiB + 512 * K + K, rules);
    ASSERT_TRUE(r.feasible) << r.note;
    const double delay_ms = cost.device_to_host_ms(MiB) - 0.01;
    if (eq5_refetch) {
      EXPECT_EQ(r.plan.choices[2].algorithm, "lean");
      EXPECT_EQ(r.plan.summary.offload_count, 0);
    } else {
      EXPECT_EQ(r.plan.choices[2].algorithm, "fast");
      EXPECT_NEAR(r.plan.choices[2].gain_ms, 2.0 - delay_ms, 1e-9);
    }
  }
}

// ---- mplan: Eq. 4 with the copy queue ------------------------------------------

// A (64K) and B (1480K) are on the host (evicted by the script before T2);
// T4 needs A, T5 right after it needs B; T2 and T3 take 1.5 ms each, T4
// 0.076 ms. With T2 running, A alone is not urgent (0.076 ms of copy, 1.5 ms
// until T4) and B alone is not either (1.526 ms of copy, 1.576 ms until T5),
// but B's copy queues behind A's: 0.076 + 1.526 > 1.576, so both start with T2. moDNN stops at T4, the first
// task that need not start, and starts B's copy only with T3.
TEST(QueuedPrefetch, ALaterLargerCopyCountsTheCopiesQueuedBeforeIt) {
  auto g = tiny_graph({{"X", 256}, {"A", 64 * K}, {"B", 1480 * K}, {"C", 256}, {"D", 256}, {"E", 256}, {"F", 256},
                       {"G", 256}},
                      {{"T0", {0}, {1, 2}}, {"T1", {1, 2}, {3}}, {"T2", {3}, {4}}, {"T3", {4}, {5}},
                       {"T4", {1, 5}, {6}}, {"T5", {2, 6}, {7}}});
  FakeCost cost;
  cost.table["T2"] = {TaskOption{"default", 1.5, 0}};
  cost.table["T3"] = {TaskOption{"default", 1.5, 0}};
  for (bool queued : {true, false}) {
    ModnnRules rules = testing::published_rules();
    rules.queued_prefetch = queued;
    testing::ScriptedDecider decider(make_modnn_decider(rules));
    decider.before[2] = [](IterationSim& sim) {
      sim.evict(sim.instance(0, 1));
      sim.evict(sim.instance(0, 2));
    };
    PlanResult r = testing::simulate_with(g->tdfg, cost, 4 * MiB, decider);
    ASSERT_TRUE(r.feasible) << r.note;
    SCOPED_TRACE(queued ? "queued" : "moDNN");
    const int b = first_step(r.plan, StepKind::prefetch, /*B=*/2);
    const int t2 = first_step(r.plan, StepKind::compute, 2);
    const int t3 = first_step(r.plan, StepKind::compute, 3);
    if (queued) EXPECT_LT(b, t2);
    else EXPECT_GT(b, t2);
    EXPECT_LT(b, t3);
  }
}

// ---- mplan: early offloads ------------------------------------------------------

// FP: T0 makes A (1 MiB), T1 makes Q (512K) from it, T2 makes C (1 MiB), T3 D
// (1 MiB); BP: T4 reads Q and D, T5 reads A. At T3, A, Q, C and D would need
// 3.5 MiB of the 3 MiB arena: the round's excess (0.5 MiB, plus the margin).
// Early offloads copy A right after its last forward use (T1: its copy is
// issued before T2), then Q after T2, while the round goes on; without them A
// is copied only when T3 needs room.
TEST(EarlyOffload, TheBlockMadeFirstIsCopiedRightAfterItsLastForwardUse) {
  auto g = tiny_graph({{"X", 256}, {"A", MiB}, {"Q", 512 * K}, {"C", MiB}, {"D", MiB}, {"E", 256}, {"F", 256}},
                      {{"T0", {0}, {1}, TaskKind::FP, true}, {"T1", {1}, {2}, TaskKind::FP, true},
                       {"T2", {2}, {3}, TaskKind::FP, true}, {"T3", {3}, {4}, TaskKind::FP, true},
                       {"T4", {2, 4}, {5}, TaskKind::BP1}, {"T5", {1, 5}, {6}, TaskKind::BP1}});
  FakeCost cost;
  for (const char* t : {"T0", "T1", "T2", "T3"}) cost.table[t] = {TaskOption{"default", 2.0, 0}};
  for (bool early : {true, false}) {
    ModnnRules rules = testing::published_rules();
    rules.lookahead_tasks = 1;
    rules.early_offload = early;
    PlanResult r = simulate_modnn(g->tdfg, cost, 3 * MiB, rules);
    ASSERT_TRUE(r.feasible) << r.note;
    SCOPED_TRACE(early ? "early offloads" : "none");
    const int a = first_step(r.plan, StepKind::offload, /*A=*/1);
    const int t2 = first_step(r.plan, StepKind::compute, 2);
    ASSERT_GE(a, 0);
    if (early) {
      EXPECT_LT(a, t2);
      EXPECT_GT(a, first_step(r.plan, StepKind::compute, 1));
      EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*Q=*/2), 1);
    } else {
      EXPECT_GT(a, t2);
      EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*Q=*/2), 0);
    }
  }
}

// ---- mplan: early drops ------------------------------------------------------------

// FP: T0 makes A (1 MiB, a convolution: never recomputed), the cheap T1 makes
// M (1 MiB) from A, T2 makes Q from M, T3 makes C; BP: T4 reads C and Q, T5 M,
// T6 A. At T3, A, M, Q and C would need 4 MiB of the 3 MiB arena. Early
// offloads copy A after T1 (its last forward use). When T3 needs room, A's
// copy is nearly done and T6 lies beyond the lookahead, so evicting A costs
// less than recomputing M: A leaves and must come back for T6. Early drops
// free M right after T2 instead, where recomputing it costs at most the ratio
// times its copy, and A stays.
//   FP: T0: X -> A;  T1: A -> M;  T2: M -> Q;  T3: Q -> C
//   BP: T4: C, Q -> D;  T5: M, D -> E;  T6: A, E -> F
std::unique_ptr<testing::TinyGraph> early_drops_graph() {
  return tiny_graph({{"X", 256}, {"A", MiB}, {"M", MiB}, {"Q", MiB}, {"C", MiB}, {"D", 256}, {"E", 256}, {"F", 256}},
                    {{"T0", {0}, {1}, TaskKind::FP, true}, {"T1", {1}, {2}}, {"T2", {2}, {3}, TaskKind::FP, true},
                     {"T3", {3}, {4}, TaskKind::FP, true}, {"T4", {4, 3}, {5}, TaskKind::BP1},
                     {"T5", {2, 5}, {6}, TaskKind::BP1}, {"T6", {1, 6}, {7}, TaskKind::BP1}});
}

PlanResult run_early_drops(double t1_ms, double ratio, int64_t arena_bytes = 3 * MiB + 1024) {
  auto g = early_drops_graph();
  FakeCost cost;
  for (const char* t : {"T0", "T2", "T3"}) cost.table[t] = {TaskOption{"default", 1.0, 0}};
  cost.table["T1"] = {TaskOption{"default", t1_ms, 0}};
  ModnnRules rules = testing::published_rules();
  rules.refetch_cost = true;
  rules.lookahead_tasks = 1;
  rules.recompute = true;
  rules.early_offload = true;
  rules.early_drop_ratio = ratio;
  return simulate_modnn(g->tdfg, cost, arena_bytes, rules);
}

TEST(EarlyDrop, ACheapOutputIsDroppedAfterItsLastForwardUseAndTheCopiedBlockStays) {
  // T1 takes 0.1 ms, at most 0.5 x M's 1.06 ms copy.
  PlanResult r = run_early_drops(0.1, 0.5);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 1);
  const int m_free = first_step(r.plan, StepKind::free, /*M=*/2);
  EXPECT_GT(m_free, first_step(r.plan, StepKind::compute, /*T2=*/2));
  EXPECT_LT(m_free, first_step(r.plan, StepKind::compute, /*T3=*/3));
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*A=*/1), 0);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*M=*/2), 0);
}

TEST(EarlyDrop, AnOutputDearerThanTheRatioIsKeptAndTheCopiedBlockLeaves) {
  // T1 takes 1 ms, more than 0.5 x 1.06 ms: M stays; A is evicted at T3 and
  // prefetched back for T6.
  PlanResult dear = run_early_drops(1.0, 0.5);
  ASSERT_TRUE(dear.feasible) << dear.note;
  EXPECT_EQ(dear.recomputed_tasks, 0);
  EXPECT_EQ(testing::count_steps_of(dear.plan, StepKind::prefetch, /*A=*/1), 1);
  // Off (ratio 0): the same, however cheap M is.
  PlanResult off = run_early_drops(0.1, 0);
  ASSERT_TRUE(off.feasible) << off.note;
  EXPECT_EQ(off.recomputed_tasks, 0);
  EXPECT_EQ(testing::count_steps_of(off.plan, StepKind::prefetch, /*A=*/1), 1);
}

// A batch norm recomputes from its saved statistics (OpSpec::
// recompute_from_saved): the normalisation alone, priced by the cost model's
// CostModel::recompute_ms, not by its first run. T1 as a batch norm that
// takes 1 ms (dearer than the ratio allows) but recomputes in 0.1 ms is
// dropped early as the cheap T1 above is, and its recomputation takes 0.1 ms.
TEST(EarlyDrop, ABatchNormIsPricedByItsRecomputationNotItsFirstRun) {
  auto g = early_drops_graph();
  g->tdfg.tasks[/*T1=*/1].op = Op::batchnorm;
  FakeCost cost;
  for (const char* t : {"T0", "T1", "T2", "T3"}) cost.table[t] = {TaskOption{"default", 1.0, 0}};
  ModnnRules rules = testing::published_rules();
  rules.refetch_cost = true;
  rules.lookahead_tasks = 1;
  rules.recompute = true;
  rules.early_offload = true;
  rules.early_drop_ratio = 0.5;
  cost.recompute_table["T1"] = 1.0;
  const PlanResult dear = simulate_modnn(g->tdfg, cost, 3 * MiB + 1024, rules);
  ASSERT_TRUE(dear.feasible) << dear.note;
  EXPECT_EQ(dear.recomputed_tasks, 0);
  cost.recompute_table["T1"] = 0.1;
  const PlanResult r = simulate_modnn(g->tdfg, cost, 3 * MiB + 1024, rules);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 1);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*A=*/1), 0);
  int recomputations = 0;
  for (const Step& s : r.plan.steps) {
    if (s.kind != StepKind::compute || !s.recompute) continue;
    ++recomputations;
    EXPECT_EQ(s.task, 1);
    EXPECT_NEAR(s.end_ms - s.start_ms, 0.1, 1e-9);
  }
  EXPECT_EQ(recomputations, 1);
}

TEST(EarlyDrop, NothingIsDroppedInARoundThatFits) {
  // 5 MiB hold every block from its first use to its last: M stays, however cheap.
  PlanResult r = run_early_drops(0.1, 0.5, 5 * MiB);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 0);
  EXPECT_EQ(r.plan.summary.offload_count, 0);
}

// ---- mplan: the refinement's per-block choices (ModnnRules::block_choices) ------

// The early-drops graph with T1 at 1 ms and no recomputation by the rules: M
// stays and A is evicted at T3 and prefetched back for T6 (as in
// EarlyDrop.AnOutputDearerThanTheRatioIsKeptAndTheCopiedBlockLeaves). A
// choice fixed for M overrides the rules for M alone.
PlanResult run_block_choice(BlockChoice m_choice) {
  auto g = early_drops_graph();
  FakeCost cost;
  for (const char* t : {"T0", "T1", "T2", "T3"}) cost.table[t] = {TaskOption{"default", 1.0, 0}};
  ModnnRules rules = testing::published_rules();
  rules.refetch_cost = true;
  rules.lookahead_tasks = 1;
  std::vector<BlockChoice> choices(g->tdfg.blocks.size(), BlockChoice::rules);
  choices[/*M=*/2] = m_choice;
  rules.block_choices = std::make_shared<const std::vector<BlockChoice>>(choices);
  return simulate_modnn(g->tdfg, cost, 3 * MiB + 1024, rules);
}

TEST(BlockChoices, ByTheRulesMStaysAndAIsCopied) {
  PlanResult r = run_block_choice(BlockChoice::rules);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 0);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*A=*/1), 1);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*M=*/2), 0);
}

TEST(BlockChoices, ADroppedBlockIsFreedAfterItsLastForwardUseAndRecomputed) {
  // M is dropped right after T2 although the rules recompute nothing; T1
  // runs again before T5, and A stays.
  PlanResult r = run_block_choice(BlockChoice::drop);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 1);
  const int m_free = first_step(r.plan, StepKind::free, /*M=*/2);
  EXPECT_GT(m_free, first_step(r.plan, StepKind::compute, /*T2=*/2));
  EXPECT_LT(m_free, first_step(r.plan, StepKind::compute, /*T3=*/3));
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*A=*/1), 0);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*M=*/2), 0);
}

TEST(BlockChoices, AnOffloadedBlockIsCopiedOutAfterItsLastForwardUseAndBroughtBack) {
  // M is copied out right after T2 and freed, and comes back for T5.
  PlanResult r = run_block_choice(BlockChoice::offload);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 0);
  const int m_offload = first_step(r.plan, StepKind::offload, /*M=*/2);
  ASSERT_GE(m_offload, 0);
  EXPECT_GT(m_offload, first_step(r.plan, StepKind::compute, /*T2=*/2));
  EXPECT_LT(m_offload, first_step(r.plan, StepKind::compute, /*T3=*/3));
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*M=*/2), 1);
  EXPECT_LT(first_step(r.plan, StepKind::prefetch, /*M=*/2), first_step(r.plan, StepKind::compute, /*T5=*/5));
}

// ---- mplan: recomputation against offloading --------------------------------------

// M (512K) is made by a cheap task T1 from A and needed again by T5; when T3
// needs room, M is the only block that may leave (A and Q are T3's inputs):
//   FP: T0: X -> A, D1;  T1: A -> M;  T2: M, D1 -> Q;  T3: Q, A -> C(768K)
//   BP: T4: C, Q -> D;  T5: M, D -> E;  T6: A, E -> F
// Arena 2 MiB + 256: X | A | D1 | M | Q | 256K free; D1 dies after T2, so C
// fits where D1 and M were once M leaves. M leaves the cheaper way: dropped,
// costing T1's time again for T5, or offloaded, costing its copy (0.53 ms)
// now and back for T5 (0.53 ms, needed within the lookahead).
std::unique_ptr<testing::TinyGraph> cheap_block_or_copies() {
  return tiny_graph({{"X", 256}, {"A", 512 * K}, {"D1", 256 * K}, {"M", 512 * K}, {"Q", 512 * K}, {"C", 768 * K},
                     {"D", 256}, {"E", 256}, {"F", 256}},
                    {{"T0", {0}, {1, 2}, TaskKind::FP, true}, {"T1", {1}, {3}}, {"T2", {3, 2}, {4}, TaskKind::FP, true},
                     {"T3", {4, 1}, {5}, TaskKind::FP, true}, {"T4", {5, 4}, {6}, TaskKind::BP1},
                     {"T5", {3, 6}, {7}, TaskKind::BP1}, {"T6", {1, 7}, {8}, TaskKind::BP1}});
}

PlanResult run_cheap_block_or_copies(double t1_ms) {
  auto g = cheap_block_or_copies();
  FakeCost cost;
  for (const char* t : {"T0", "T2", "T3"}) cost.table[t] = {TaskOption{"default", 1.0, 0}};
  cost.table["T1"] = {TaskOption{"default", t1_ms, 0}};
  ModnnRules rules = testing::published_rules();
  rules.recompute = true;
  rules.refetch_cost = true;
  return simulate_modnn(g->tdfg, cost, 2 * MiB + 256, rules);
}

TEST(Recompute, DropChosenWhenRecomputingIsCheaperThanTheCopies) {
  // T1 takes 0.1 ms < 1.06 ms of copies: M is dropped and T1 runs again before T5.
  PlanResult r = run_cheap_block_or_copies(0.1);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 1);
  ASSERT_EQ(r.recompute_steps.size(), 1u);
  EXPECT_EQ(r.plan.steps[r.recompute_steps[0]].task, 1);
  EXPECT_EQ(r.plan.summary.offload_count, 0);
}

TEST(Recompute, OffloadChosenWhenTheCopiesAreCheaperThanRecomputing) {
  // T1 takes 5 ms > 1.06 ms of copies: M is offloaded and prefetched back.
  PlanResult r = run_cheap_block_or_copies(5.0);
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.recomputed_tasks, 0);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, /*M=*/3), 1);
  EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, /*M=*/3), 1);
}

// ---- §IV-B.1: defragmentation --------------------------------------------------

// T0 makes A, B, C (512K each) above X; T1 turns B into D (256, where X was)
// and B dies, leaving a 512K hole between A and C, and 512K - 256 at the top.
// T2 reads A and C (neither may leave) and writes E (1 MiB): no offloading
// scheme exists (D, not used since it was made, may not leave either), so
// everything is evicted and A and C are loaded back next to E (moDNN:
// "offloading all data and then reloading required data").
//   T0: X -> A, B, C;  T1: B -> D;  T2: A, C -> E;  T3: D, E -> F
TEST(Defragmentation, EvictsEverythingThenReloadsTheInputs) {
  auto g = tiny_graph({{"X", 256}, {"A", 512 * K}, {"B", 512 * K}, {"C", 512 * K}, {"D", 256}, {"E", MiB}, {"F", 256}},
                      {{"T0", {0}, {1, 2, 3}}, {"T1", {2}, {4}}, {"T2", {1, 3}, {5}}, {"T3", {4, 5}, {6}}});
  FakeCost cost;
  PlanResult r = simulate_modnn(g->tdfg, cost, 2 * MiB, testing::published_rules());
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_EQ(r.plan.summary.defragmentation_count, 1);
  for (BlockId b : {1, 3}) {
    EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::offload, b), 1) << b;
    EXPECT_EQ(testing::count_steps_of(r.plan, StepKind::prefetch, b), 1) << b;
  }
  // Nothing was allocated and freed unused (reserve then commit, iteration_sim.h).
  for (const Buffer& buf : r.plan.buffers) {
    if (buf.resident) continue;
    bool used = false;
    for (const Step& s : r.plan.steps)
      used = used || s.workspace == buf.id ||
             ((s.kind == StepKind::offload || s.kind == StepKind::prefetch) && s.buffer == buf.id) ||
             std::count(s.reads.begin(), s.reads.end(), buf.id) || std::count(s.writes.begin(), s.writes.end(), buf.id);
    EXPECT_TRUE(used) << "buffer " << buf.id << " is allocated and freed unused";
  }
}

// Around the task (ModnnRules::defragment_around_task): T0 makes P, A and Q
// (512K each) in a row above X's 256 bytes, which X leaves free; T1 reads A
// and writes E (1 MiB). P and Q, not used since they were made, may not
// leave by the offloading scheme, and the top holds 512K: T1 fails on
// fragmentation. Evicting P and Q but not T1's input A frees 1 MiB in one
// piece above A, so A stays; moDNN's defragmentation evicts A too and loads
// it back for T1, a round trip more. Both bring P and Q back for T2.
//   T0: X -> P, A, Q;  T1: A -> E;  T2: P, Q, E -> F
TEST(Defragmentation, AroundTheTaskKeepsItsInputsOnTheDevice) {
  auto g = tiny_graph({{"X", 256}, {"P", 512 * K}, {"A", 512 * K}, {"Q", 512 * K}, {"E", MiB}, {"F", 256}},
                      {{"T0", {0}, {1, 2, 3}}, {"T1", {2}, {4}}, {"T2", {1, 3, 4}, {5}}});
  FakeCost cost;
  const int64_t arena = 2 * MiB + 1024;
  ModnnRules around = testing::published_rules();
  around.defragment_around_task = true;
  const PlanResult kept = simulate_modnn(g->tdfg, cost, arena, around);
  const PlanResult moved = simulate_modnn(g->tdfg, cost, arena, testing::published_rules());
  ASSERT_TRUE(kept.feasible) << kept.note;
  ASSERT_TRUE(moved.feasible) << moved.note;
  EXPECT_EQ(kept.plan.summary.defragmentation_count, 1);
  EXPECT_EQ(moved.plan.summary.defragmentation_count, 1);
  const BlockId a = 2;
  EXPECT_EQ(testing::count_steps_of(kept.plan, StepKind::offload, a), 0);
  EXPECT_EQ(testing::count_steps_of(moved.plan, StepKind::offload, a), 1);
  EXPECT_EQ(testing::count_steps_of(moved.plan, StepKind::prefetch, a), 1);
  for (BlockId b : {1, 3}) {
    EXPECT_EQ(testing::count_steps_of(kept.plan, StepKind::offload, b), 1) << b;
    EXPECT_EQ(testing::count_steps_of(kept.plan, StepKind::prefetch, b), 1) << b;
  }
  EXPECT_LT(kept.plan.summary.simulated_ms, moved.plan.summary.simulated_ms);
  // mplan's search, at the batch of one sample the graph has, finds it.
  PlanOptions o;
  o.budget_bytes = arena;
  o.sub_batch = 1;
  const PlanResult searched = plan_iteration(g->tdfg, cost, o);
  ASSERT_TRUE(searched.feasible) << searched.note;
  EXPECT_NE(searched.note.find("defragmenting around the task"), std::string::npos) << searched.note;
}

// A short-lived block of a sixteenth of the arena splits the room (ResNet-18's
// input batch before its stem's batch norm, planner/mplan_search.cpp,
// search_placements). Arena 16 MiB; X (2 MiB) is read by T0 alone, Y (7 MiB)
// by T1 and T2, Z takes 7.5 MiB:
//   T0: X -> Y;  T1: Y -> Z;  T2: Y, Z -> F
// Best fit puts X at [0, 2) and Y at [2, 9); stacking from a sixteenth puts
// X at [14, 16) and Y at [7, 14). Either way, once X is freed the largest
// free piece is 7 MiB and T1 fails on fragmentation: the plan defragments
// and Y goes out and back. Stacking from a quarter leaves X at the bottom and
// Y at [9, 16): Z fits below Y, no copy at all.
TEST(Placement, CoarseStackingWhereTheBestPlanDefragmented) {
  auto g = tiny_graph({{"X", 2 * MiB}, {"Y", 7 * MiB}, {"Z", 7 * MiB + 512 * K}, {"F", 256}},
                      {{"T0", {0}, {1}}, {"T1", {1}, {2}}, {"T2", {1, 2}, {3}}});
  FakeCost cost;
  PlanOptions o;
  o.budget_bytes = 16 * MiB;
  o.sub_batch = 1;
  o.compaction = false;  // moving Y on the device would make the room too (compaction_test.cpp)
  const PlanResult coarse = plan_iteration(g->tdfg, cost, o);
  o.coarse_large_block_divisor = 0;
  const PlanResult sixteenth = plan_iteration(g->tdfg, cost, o);
  ASSERT_TRUE(coarse.feasible) << coarse.note;
  ASSERT_TRUE(sixteenth.feasible) << sixteenth.note;
  EXPECT_GE(sixteenth.plan.summary.defragmentation_count, 1);
  EXPECT_GT(sixteenth.plan.summary.bytes_to_host, 0);
  EXPECT_EQ(coarse.plan.summary.defragmentation_count, 0);
  EXPECT_EQ(coarse.plan.summary.bytes_to_host, 0);
  EXPECT_EQ(coarse.plan.summary.prefetch_count, 0);
  EXPECT_LT(coarse.plan.summary.simulated_ms, sixteenth.plan.summary.simulated_ms);
  for (const Buffer& b : coarse.plan.buffers)
    if (b.block == /*Y=*/1) EXPECT_EQ(b.offset, 9 * MiB);
}

}  // namespace
}  // namespace mplan
