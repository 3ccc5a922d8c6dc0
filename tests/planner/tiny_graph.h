#pragma once
// Tiny TDFGs built from tables for the planner's scenario tests (as TFLite's
// arena planner tests do): blocks {name, bytes per sample}, tasks {name,
// reads, writes, kind}, one sample per round, no update task. And a helper
// that runs moDNN's decider with given rules on the iteration simulator.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/deciders/deciders.h"
#include "planner/plan.h"
#include "planner/search_internal.h"
#include "planner/sim/iteration_sim.h"
#include "planner/verify.h"
#include "planner_test_util.h"
#include "tdfg/tdfg.h"

namespace mplan::testing {

struct TinyTask {
  std::string name;
  std::vector<BlockId> reads, writes;
  TaskKind kind = TaskKind::FP;
  bool algorithms = false;  // a conv-like task: options from FakeCost's table, never recomputed
};

// A TDFG from a table; the Tdfg points at the Model, so both live here.
struct TinyGraph {
  Model model;
  Tdfg tdfg;
};

// Blocks are layer outputs (BlockKind::output) unless never written (input
// data, loaded from the host). FP tasks get recompute signatures equal to
// what they read and write (cheap ops: no algorithms).
inline std::unique_ptr<TinyGraph> tiny_graph(const std::vector<std::pair<std::string, int64_t>>& blocks,
                                             const std::vector<TinyTask>& tasks) {
  auto g = std::make_unique<TinyGraph>();
  g->model.name = "tiny";
  g->model.batch = 1;
  for (const auto& [name, bytes] : blocks) {
    Block b;
    b.name = name;
    b.bytes_per_sample = bytes;
    g->tdfg.blocks.push_back(b);
  }
  for (const TinyTask& spec : tasks) {
    Task t;
    t.name = spec.name;
    t.kind = spec.kind;
    t.reads = spec.reads;
    t.writes = spec.writes;
    t.has_algorithms = spec.algorithms;
    const auto id = static_cast<TaskId>(g->tdfg.tasks.size());
    for (BlockId b : spec.reads) g->tdfg.blocks[b].readers.push_back(id);
    for (BlockId b : spec.writes) g->tdfg.blocks[b].writers.push_back(id);
    if (spec.kind == TaskKind::FP && !spec.algorithms) {
      t.recompute_reads = spec.reads;
      t.recompute_writes = spec.writes;
    }
    g->tdfg.tasks.push_back(t);
  }
  for (Block& b : g->tdfg.blocks) b.kind = b.writers.empty() ? BlockKind::input : BlockKind::output;
  g->tdfg.model = &g->model;
  return g;
}

// A block A made first and needed again at the end; the tasks between need
// the room it holds, so it is offloaded (when T2 allocates) and brought back:
//
//   X(256) -T0-> A(512K) -T1-> B(1536K) -T2-> C(512K) -T3..-> D(512K) -T4(D, A)-> E(256)
//
// Arena 2 MiB + 512: T2 needs B and C (2 MiB) beside A -> A goes to the host.
// From T3 on only C and D are live (1 MiB), so A fits again; line 16's
// prediction (T4's need + the running task's <= the arena) allows its prefetch.
inline std::unique_ptr<TinyGraph> offload_then_reuse(int middle_tasks) {
  constexpr int64_t K = 1024;
  std::vector<std::pair<std::string, int64_t>> blocks = {{"X", 256}, {"A", 512 * K}, {"B", 1536 * K},
                                                         {"C", 512 * K}, {"D", 512 * K}, {"E", 256}};
  std::vector<TinyTask> tasks = {{"T0", {0}, {1}}, {"T1", {1}, {2}}, {"T2", {2}, {3}}};
  // T3a, T3b, ...: C -> C' -> ... small steps that keep C and D's room.
  BlockId c = 3;
  for (int i = 0; i < middle_tasks; ++i) {
    blocks.push_back({"M" + std::to_string(i), 256});
    const auto m = static_cast<BlockId>(blocks.size() - 1);
    tasks.push_back({"T3" + std::string(1, static_cast<char>('a' + i)), {c}, {m}});
    c = m;
  }
  tasks.push_back({"T3", {c}, {4}});
  tasks.push_back({"T4", {4, 1}, {5}});
  return tiny_graph(blocks, tasks);
}

// moDNN's decider with `rules` over the simulator: one round of one sample.
inline PlanResult simulate_modnn(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, const ModnnRules& rules,
                                int copy_engines = 2) {
  SimOptions o;
  o.sub_batches = {1};
  o.arena_bytes = arena_bytes;
  o.copy_engines = copy_engines;
  std::unique_ptr<Decider> decider = make_modnn_decider(rules);
  PlanResult r = simulate_iteration(tdfg, cost, o, *decider);
  if (r.feasible) {
    // The header the plan search fills (the verifier checks it against the model).
    search::fill_header(&r.plan, tdfg, cost, r.plan.resident_region_bytes + r.plan.arena_bytes, 1);
    expect_consistent(tdfg, r.plan);
    const std::vector<Violation> v = verify_plan(r.plan, tdfg);
    EXPECT_TRUE(v.empty()) << to_string(v.front());
  }
  return r;
}

// A decider that forwards to an inner one and runs scripted actions before
// chosen tasks (position k of round 0): sets up the state a heuristic is tested in.
class ScriptedDecider final : public Decider {
 public:
  explicit ScriptedDecider(std::unique_ptr<Decider> inner) : inner_(std::move(inner)) {}
  std::map<int32_t, std::function<void(IterationSim&)>> before;  // position -> action
  std::vector<std::pair<int32_t, RoomRequest>> rooms;            // (position, request) of make_room calls

  void start(IterationSim& sim) override { inner_->start(sim); }
  void start_round(IterationSim& sim, int32_t r) override { inner_->start_round(sim, r); }
  bool may_drop(const IterationSim& sim, BlockId b) override { return inner_->may_drop(sim, b); }
  void before_task(IterationSim& sim, int32_t r, int32_t k) override {
    auto it = before.find(k);
    if (r == 0 && it != before.end()) it->second(sim);
    inner_->before_task(sim, r, k);
  }
  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& request) override {
    rooms.emplace_back(sim.current_position(), request);
    return inner_->make_room(sim, request);
  }
  size_t choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& options) override {
    return inner_->choose_option(sim, r, k, options);
  }
  double last_gain_ms() const override { return inner_->last_gain_ms(); }
  bool defragment_on_failure() const override { return inner_->defragment_on_failure(); }
  void before_issue(IterationSim& sim, int32_t r, int32_t k, double ms) override { inner_->before_issue(sim, r, k, ms); }
  void after_task(IterationSim& sim, int32_t r, int32_t k) override { inner_->after_task(sim, r, k); }

 private:
  std::unique_ptr<Decider> inner_;
};

// Runs `decider` over the simulator (one round of one sample) and checks the plan.
inline PlanResult simulate_with(const Tdfg& tdfg, const CostModel& cost, int64_t arena_bytes, Decider& decider,
                               int copy_engines = 2) {
  SimOptions o;
  o.sub_batches = {1};
  o.arena_bytes = arena_bytes;
  o.copy_engines = copy_engines;
  PlanResult r = simulate_iteration(tdfg, cost, o, decider);
  if (r.feasible) {
    // The header the plan search fills (the verifier checks it against the model).
    search::fill_header(&r.plan, tdfg, cost, r.plan.resident_region_bytes + r.plan.arena_bytes, 1);
    expect_consistent(tdfg, r.plan);
    const std::vector<Violation> v = verify_plan(r.plan, tdfg);
    EXPECT_TRUE(v.empty()) << to_string(v.front());
  }
  return r;
}

// moDNN as published: no recomputation, no early offloads, no copy queue in Eq. 4.
inline ModnnRules published_rules() {
  ModnnRules r;
  r.refetch_cost = false;
  return r;
}

// The index of the first step of `kind` on `task` (compute) or on a buffer of
// `block` (copies, alloc, free); -1 if none.
inline int first_step(const Plan& plan, StepKind kind, int32_t task_or_block) {
  for (const Step& s : plan.steps) {
    if (s.kind != kind) continue;
    if (kind == StepKind::compute ? s.task == task_or_block : plan.buffers[s.buffer].block == task_or_block)
      return s.index;
  }
  return -1;
}

// The index of the last such step; -1 if none.
inline int last_step(const Plan& plan, StepKind kind, int32_t task_or_block) {
  int last = -1;
  for (const Step& s : plan.steps) {
    if (s.kind != kind) continue;
    if (kind == StepKind::compute ? s.task == task_or_block : plan.buffers[s.buffer].block == task_or_block)
      last = s.index;
  }
  return last;
}

inline int count_steps_of(const Plan& plan, StepKind kind, BlockId block) {
  int n = 0;
  for (const Step& s : plan.steps)
    if (s.kind == kind && s.buffer >= 0 && plan.buffers[s.buffer].block == block) ++n;
  return n;
}

}  // namespace mplan::testing
