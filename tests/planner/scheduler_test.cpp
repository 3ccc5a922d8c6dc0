// Tiny hand-built TDFGs with the expected steps and offsets written first.

#include <gtest/gtest.h>

#include "planner/planner.h"
#include "planner_test_util.h"

namespace mplan {
namespace {

using testing::expect_consistent;
using testing::FakeCost;

// A TDFG from a table: blocks {name, bytes per sample}; tasks {name, reads, writes}.
struct TinyGraph {
  Model model;
  Tdfg tdfg;
};

TinyGraph tiny(std::vector<std::pair<std::string, int64_t>> blocks,
               std::vector<std::tuple<std::string, std::vector<BlockId>, std::vector<BlockId>>> tasks) {
  TinyGraph g;
  g.model.name = "tiny";
  g.model.batch = 1;
  for (auto& [name, bytes] : blocks) {
    Block b;
    b.name = name;
    b.bytes_per_sample = bytes;
    g.tdfg.blocks.push_back(b);
  }
  for (auto& [name, reads, writes] : tasks) {
    Task t;
    t.name = name;
    t.reads = reads;
    t.writes = writes;
    auto id = static_cast<TaskId>(g.tdfg.tasks.size());
    for (BlockId b : reads) g.tdfg.blocks[b].readers.push_back(id);
    for (BlockId b : writes) g.tdfg.blocks[b].writers.push_back(id);
    g.tdfg.tasks.push_back(t);
  }
  return g;
}

struct Expected {
  StepKind kind;
  BufferId buffer;  // alloc/free/copies; the task for compute
  int64_t offset;   // alloc: the buffer's offset; else -1
};

void expect_steps(const Plan& plan, const std::vector<Expected>& want) {
  ASSERT_EQ(plan.steps.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Step& s = plan.steps[i];
    SCOPED_TRACE("step " + std::to_string(i));
    EXPECT_EQ(s.kind, want[i].kind);
    if (s.kind == StepKind::compute) {
      EXPECT_EQ(s.task, want[i].buffer);
    } else {
      EXPECT_EQ(s.buffer, want[i].buffer);
    }
    if (want[i].offset >= 0) {
      EXPECT_EQ(plan.buffers[s.buffer].offset, want[i].offset);
    }
  }
}

TEST(Scheduler, ChainReusesFreedSpace) {
  // X(1000) -T0-> A(512) -T1-> B(256) -T2-> C(256), budget 64 KiB, no pressure.
  // Expected (best fit):
  //   0 alloc b0 X@0   1 prefetch b0 (input load)   2 alloc b1 A@1024
  //   3 compute T0     4 free b0
  //   5 alloc b2 B@0 (the 1024 hole at 0 is the best fit)
  //   6 compute T1     7 free b1
  //   8 alloc b3 C@256 (holes coalesced into [256, end))
  //   9 compute T2     10 free b2   11 free b3
  // T1 writes where X was: it follows the prefetch through T0, so no wait.
  TinyGraph g = tiny({{"X", 1000}, {"A", 512}, {"B", 256}, {"C", 256}},
                     {{"T0", {0}, {1}}, {"T1", {1}, {2}}, {"T2", {2}, {3}}});
  g.tdfg.model = &g.model;
  FakeCost cost;
  PlanOptions o;
  o.budget_bytes = 64 << 10;
  Result<Plan> plan = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  expect_steps(*plan, {{StepKind::alloc, 0, 0},     {StepKind::prefetch, 0, -1}, {StepKind::alloc, 1, 1024},
                       {StepKind::compute, 0, -1},  {StepKind::free, 0, -1},     {StepKind::alloc, 2, 0},
                       {StepKind::compute, 1, -1},  {StepKind::free, 1, -1},     {StepKind::alloc, 3, 256},
                       {StepKind::compute, 2, -1},  {StepKind::free, 2, -1},     {StepKind::free, 3, -1}});
  EXPECT_EQ(plan->steps[3].waits, std::vector<EventId>{0});  // T0 waits for the input load
  EXPECT_TRUE(plan->steps[6].waits.empty());
  EXPECT_EQ(plan->summary.offload_count, 0);
  EXPECT_EQ(plan->summary.prefetch_count, 0);
  EXPECT_EQ(plan->summary.input_load_count, 1);
  EXPECT_EQ(plan->summary.peak_arena_bytes, 1536);
  EXPECT_EQ(plan->event_count, 1);
  expect_consistent(g.tdfg, *plan);
}

TEST(Scheduler, OffloadsTheCheapestContiguousBlockAndPrefetchesIt) {
  // X(256) -T0-> A(1024) -T1-> B(1024) -T2-> C(1024); T3 reads A and C, writes D(256).
  // Arena 3072, prefetch ahead off (loads on demand), one task at a time:
  //   0 alloc b0 X@0  1 prefetch b0  2 alloc b1 A@256  3 compute T0  4 free b0
  //   5 alloc b2 B@1280  6 compute T1
  //   T2 needs 1024 for C; free: [0,256) and [2304,3072). Schemes: {free@0, A}
  //   and {A@256} (B is T2's input). Same delay and bytes: the lower address wins.
  //   7 offload b1 (A)  8 free b1  9 alloc b3 C@0  10 compute T2 (waits for 7)
  //   11 free b2 (B)
  //   T3: free is [1024, 3072): A comes back at 1024, D at 2048.
  //   12 alloc b4 A@1024  13 prefetch b4 (waits for T2: B's range; 7 is implied)
  //   14 alloc b5 D@2048  15 compute T3  16 free b4  17 free b3  18 free b5
  TinyGraph g = tiny({{"X", 256}, {"A", 1024}, {"B", 1024}, {"C", 1024}, {"D", 256}},
                     {{"T0", {0}, {1}}, {"T1", {1}, {2}}, {"T2", {2}, {3}}, {"T3", {1, 3}, {4}}});
  g.tdfg.model = &g.model;
  FakeCost cost;
  PlanOptions o;
  o.budget_bytes = 3072;
  o.prefetch = false;
  o.large_block_divisor = 0;  // plain best fit
  Result<Plan> plan = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  expect_steps(*plan, {{StepKind::alloc, 0, 0},       {StepKind::prefetch, 0, -1}, {StepKind::alloc, 1, 256},
                       {StepKind::compute, 0, -1},    {StepKind::free, 0, -1},     {StepKind::alloc, 2, 1280},
                       {StepKind::compute, 1, -1},    {StepKind::offload, 1, -1},  {StepKind::free, 1, -1},
                       {StepKind::alloc, 3, 0},       {StepKind::compute, 2, -1},  {StepKind::free, 2, -1},
                       {StepKind::alloc, 4, 1024},    {StepKind::prefetch, 4, -1}, {StepKind::alloc, 5, 2048},
                       {StepKind::compute, 3, -1},    {StepKind::free, 4, -1},     {StepKind::free, 3, -1},
                       {StepKind::free, 5, -1}});
  const Plan& p = *plan;
  EXPECT_EQ(p.steps[7].stream, StreamKind::d2h);
  EXPECT_EQ(p.steps[13].stream, StreamKind::h2d);
  // Events are numbered as first needed: 0 the input load, 1 compute T0
  // (A's writer, which the offload waits for), 2 the offload, 3 compute T2,
  // 4 the prefetch of A.
  EXPECT_EQ(p.steps[7].waits, std::vector<EventId>{1});
  EXPECT_EQ(p.steps[10].waits, std::vector<EventId>{2});
  // The prefetch follows T2 (B's range); T2 already followed the offload,
  // so that wait is implied and left out.
  EXPECT_EQ(p.steps[13].waits, std::vector<EventId>{3});
  EXPECT_EQ(p.steps[15].waits, std::vector<EventId>{4});
  EXPECT_EQ(p.summary.offload_count, 1);
  EXPECT_EQ(p.summary.prefetch_count, 1);
  EXPECT_EQ(p.summary.bytes_to_host, 1024);
  EXPECT_EQ(p.host_slots.size(), 2u);  // X's input data and A
  expect_consistent(g.tdfg, p);
}

TEST(Scheduler, OneCopyEngineSharesTheCopyStream) {
  TinyGraph g = tiny({{"X", 256}, {"A", 1024}, {"B", 1024}, {"C", 1024}, {"D", 256}},
                     {{"T0", {0}, {1}}, {"T1", {1}, {2}}, {"T2", {2}, {3}}, {"T3", {1, 3}, {4}}});
  g.tdfg.model = &g.model;
  FakeCost cost;
  PlanOptions o;
  o.budget_bytes = 3072;
  o.copy_engines = 1;
  Result<Plan> plan = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_EQ(plan->copy_engines, 1);
  for (const Step& s : plan->steps) {
    if (s.kind == StepKind::offload || s.kind == StepKind::prefetch) {
      EXPECT_EQ(s.stream, StreamKind::copy);
    }
  }
  expect_consistent(g.tdfg, *plan);
}

TEST(Scheduler, AlgorithmSelectionTakesTheFastestThatFits) {
  // One conv-like task: X(1024) -> Y(1024). Options: fast with 4 KiB
  // workspace, lean with none. With room the fast one wins (gain 2 ms);
  // with an arena of 2 KiB it cannot fit and the lean one runs.
  TinyGraph g = tiny({{"X", 1024}, {"Y", 1024}}, {{"conv", {0}, {1}}});
  g.tdfg.tasks[0].has_algorithms = true;
  g.tdfg.model = &g.model;
  FakeCost cost;
  cost.table["conv"] = {TaskOption{"fast", 1.0, 4096}, TaskOption{"lean", 3.0, 0}};
  PlanOptions o;
  o.budget_bytes = 64 << 10;
  o.large_block_divisor = 0;  // plain best fit
  Result<Plan> roomy = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_TRUE(roomy.ok());
  ASSERT_EQ(roomy->choices.size(), 1u);
  EXPECT_EQ(roomy->choices[0].algorithm, "fast");
  EXPECT_DOUBLE_EQ(roomy->choices[0].gain_ms, 2.0);
  EXPECT_EQ(roomy->choices[0].workspace_offset, 2048);
  expect_consistent(g.tdfg, *roomy);
  o.budget_bytes = 2048;
  Result<Plan> tight = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_TRUE(tight.ok()) << tight.error().to_string();
  EXPECT_EQ(tight->choices[0].algorithm, "lean");
  EXPECT_EQ(tight->choices[0].workspace, kNoBuffer);
  expect_consistent(g.tdfg, *tight);
}

TEST(Scheduler, BudgetBelowTheMinimumNamesTheTask) {
  // T1 needs A + B = 1024 + 2048 bytes: the minimum is 3072.
  TinyGraph g = tiny({{"X", 256}, {"A", 1024}, {"B", 2048}},
                     {{"T0", {0}, {1}}, {"T1", {1}, {2}}});
  g.tdfg.model = &g.model;
  FakeCost cost;
  PlanOptions o;
  o.budget_bytes = 3071;
  Result<Plan> plan = plan_iteration(g.tdfg, cost, o).take_plan();
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("minimum 3072 bytes"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("T1"), std::string::npos) << plan.error().message;
  o.budget_bytes = 3072;
  EXPECT_TRUE(plan_iteration(g.tdfg, cost, o).take_plan().ok());
}

}  // namespace
}  // namespace mplan
