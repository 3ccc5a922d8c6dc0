#pragma once
// Helpers of the planner tests: a table-driven fake cost model and an
// internal consistency check of plans (the independent verifier lives in
// planner/verify*; this check only replays buffers, events and times).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan::testing {

// Times and workspaces from a table by task name; tasks not in the table
// take 1 ms per MB of non-resident blocks touched (at least 0.01 ms) and,
// for tasks with algorithms, three options: "winograd" (fastest, workspace 4x
// the inputs), "gemm" (1.5x the time, workspace 1x), "implicit_gemm" (3x the
// time, no workspace). Copies take 0.01 ms + 1 ms per MB.
class FakeCost final : public CostModel {
 public:
  std::map<std::string, std::vector<TaskOption>> table;
  // The time of a recomputation from saved state, by task name (tasks whose
  // op recomputes from saved state, OpSpec::recompute_from_saved).
  std::map<std::string, double> recompute_table;
  int engines = 2;
  double copy_ms_per_mb = 1.0;

  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t) const override {
    auto it = recompute_table.find(tdfg.tasks[t].name);
    if (it == recompute_table.end()) return std::nullopt;
    return it->second;
  }

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    const Task& task = tdfg.tasks[t];
    auto it = table.find(task.name);
    if (it != table.end()) return it->second;
    int64_t bytes = 0, in_bytes = 0;
    for (BlockId b : task.reads) {
      if (!tdfg.blocks[b].resident) {
        bytes += tdfg.blocks[b].bytes(sub_batch);
        in_bytes += tdfg.blocks[b].bytes(sub_batch);
      }
    }
    for (BlockId b : task.writes) {
      if (!tdfg.blocks[b].resident) bytes += tdfg.blocks[b].bytes(sub_batch);
    }
    // A fixed launch cost makes small sub-batches slower per sample.
    double ms = 0.01 + bytes / 1e6;
    if (!task.has_algorithms) return {TaskOption{"default", ms, 0}};
    return {TaskOption{"winograd", ms, 4 * in_bytes}, TaskOption{"gemm", 1.5 * ms, in_bytes},
            TaskOption{"implicit_gemm", 3 * ms, 0}};
  }
  double host_to_device_ms(int64_t bytes) const override { return 0.01 + copy_ms_per_mb * bytes / 1e6; }
  double device_to_host_ms(int64_t bytes) const override { return 0.01 + copy_ms_per_mb * bytes / 1e6; }
  int copy_engines() const override { return engines; }
  int64_t device_memory_bytes() const override { return int64_t{1} << 40; }
  std::string describe() const override { return "fake (tests/planner)"; }
};

// Replays the plan and checks what the planner promises: buffers in the arena
// never overlap while live and end within it; every step waits only for
// recorded events; every compute step finds its blocks live, in the right
// buffer, holding data; a buffer's first writer starts after every user of
// what was in its range before; a reader starts after the last writer; each
// task runs once per round and the update once, last.
inline void dump_plan(const Tdfg& tdfg, const Plan& plan) {
  for (const Step& s : plan.steps) {
    std::printf("%d %s %s task=%s buf=%d", s.index, step_kind_name(s.kind), stream_kind_name(s.stream),
                s.task >= 0 ? tdfg.tasks[s.task].name.c_str() : "-", s.buffer);
    if (s.buffer >= 0) {
      const Buffer& b = plan.buffers[s.buffer];
      std::printf(" [%lld,+%lld) %s", (long long)b.offset, (long long)b.bytes,
                  b.block >= 0 ? tdfg.blocks[b.block].name.c_str() : "ws");
    }
    std::printf(" waits=");
    for (EventId e : s.waits) std::printf("%d,", e);
    std::printf(" rec=%d %.4f-%.4f\n", s.records, s.start_ms, s.end_ms);
  }
}

inline void expect_consistent(const Tdfg& tdfg, const Plan& plan) {
  if (std::getenv("MPLAN_DUMP_PLAN")) dump_plan(tdfg, plan);
  ASSERT_LE(plan.summary.peak_arena_bytes, plan.arena_bytes);
  ASSERT_LE(plan.resident_region_bytes + plan.arena_bytes, plan.budget_bytes);
  int64_t sum = 0;
  for (int64_t b : plan.sub_batches) sum += b;
  ASSERT_EQ(sum, plan.batch);
  auto reserved = [](int64_t bytes) { return align_up(std::max<int64_t>(1, bytes)); };
  std::set<BufferId> live;
  std::set<BufferId> has_data;
  std::vector<double> users_end(plan.buffers.size(), 0);   // latest end of a step using the buffer
  std::vector<double> writer_end(plan.buffers.size(), 0);  // end of the last writer
  std::vector<double> must_start(plan.buffers.size(), 0);  // earlier occupants' users
  std::vector<BufferId> freed;
  std::vector<bool> recorded(plan.event_count, false);
  std::map<std::pair<TaskId, int32_t>, int> runs;
  for (const Buffer& b : plan.buffers) {
    if (b.resident) {
      has_data.insert(b.id);
      EXPECT_EQ(b.offset % kPlanAlignmentBytes, 0);
      EXPECT_LE(b.offset + reserved(b.bytes), plan.resident_region_bytes);
    }
  }
  auto overlap = [&](const Buffer& a, const Buffer& b) {
    return a.offset < b.offset + reserved(b.bytes) && b.offset < a.offset + reserved(a.bytes);
  };
  auto first_write = [&](BufferId id, const Step& s) {
    if (has_data.count(id)) return;
    EXPECT_GE(s.start_ms + 1e-9, must_start[id]) << "step " << s.index << " overwrites a range too early (buffer " << id << ")";
    has_data.insert(id);
  };
  for (const Step& s : plan.steps) {
    ASSERT_EQ(s.index, &s - plan.steps.data());
    for (EventId e : s.waits) {
      ASSERT_GE(e, 0);
      ASSERT_LT(e, plan.event_count);
      EXPECT_TRUE(recorded[e]) << "step " << s.index << " waits for an event not yet recorded";
    }
    switch (s.kind) {
      case StepKind::alloc: {
        const Buffer& b = plan.buffers[s.buffer];
        ASSERT_FALSE(b.resident);
        EXPECT_EQ(b.offset % kPlanAlignmentBytes, 0);
        EXPECT_LE(b.offset + reserved(b.bytes), plan.arena_bytes);
        for (BufferId o : live) {
          EXPECT_FALSE(overlap(b, plan.buffers[o])) << "buffers " << o << " and " << b.id << " overlap";
        }
        for (BufferId f : freed) {
          if (overlap(b, plan.buffers[f])) must_start[b.id] = std::max(must_start[b.id], users_end[f]);
        }
        EXPECT_TRUE(live.insert(b.id).second);
        break;
      }
      case StepKind::free:
        EXPECT_EQ(live.erase(s.buffer), 1u) << "free of a buffer not live, step " << s.index;
        freed.push_back(s.buffer);
        break;
      case StepKind::offload:
        EXPECT_TRUE(live.count(s.buffer));
        EXPECT_TRUE(has_data.count(s.buffer));
        EXPECT_GE(s.start_ms + 1e-9, writer_end[s.buffer]);
        users_end[s.buffer] = std::max(users_end[s.buffer], s.end_ms);
        break;
      case StepKind::move: {
        // Compaction: one instance copied between two live buffers of it.
        ASSERT_EQ(s.reads.size(), 1u);
        ASSERT_EQ(s.writes.size(), 1u);
        const BufferId from = s.reads[0], to = s.writes[0];
        EXPECT_EQ(to, s.buffer);
        EXPECT_EQ(plan.buffers[from].block, plan.buffers[to].block);
        EXPECT_EQ(plan.buffers[from].round, plan.buffers[to].round);
        EXPECT_TRUE(live.count(from) && live.count(to)) << "move of step " << s.index;
        EXPECT_FALSE(overlap(plan.buffers[from], plan.buffers[to]));
        EXPECT_TRUE(has_data.count(from));
        EXPECT_GE(s.start_ms + 1e-9, writer_end[from]);
        first_write(to, s);
        writer_end[to] = s.end_ms;
        users_end[from] = std::max(users_end[from], s.end_ms);
        users_end[to] = std::max(users_end[to], s.end_ms);
        break;
      }
      case StepKind::prefetch:
        EXPECT_TRUE(live.count(s.buffer));
        first_write(s.buffer, s);
        writer_end[s.buffer] = s.end_ms;
        users_end[s.buffer] = std::max(users_end[s.buffer], s.end_ms);
        break;
      case StepKind::compute: {
        const Task& task = tdfg.tasks[s.task];
        if (!s.recompute) runs[{s.task, s.round}]++;
        // A recomputation lists the buffers of the task's recompute signature.
        const std::vector<BlockId>& reads = s.recompute ? task.recompute_reads : task.reads;
        const std::vector<BlockId>& writes = s.recompute ? task.recompute_writes : task.writes;
        ASSERT_EQ(s.reads.size(), reads.size());
        ASSERT_EQ(s.writes.size(), writes.size());
        for (size_t i = 0; i < reads.size(); ++i) {
          BufferId id = s.reads[i];
          ASSERT_GE(id, 0);
          const Buffer& b = plan.buffers[id];
          EXPECT_EQ(b.block, reads[i]);
          EXPECT_TRUE(b.resident || live.count(id)) << task.name << " reads a buffer not live";
          EXPECT_TRUE(has_data.count(id)) << task.name << " reads " << tdfg.blocks[b.block].name
                                          << " before it holds data";
          EXPECT_GE(s.start_ms + 1e-9, writer_end[id]);
          if (!b.resident) {
            EXPECT_EQ(b.round, s.round);
          }
        }
        for (size_t i = 0; i < writes.size(); ++i) {
          BufferId id = s.writes[i];
          ASSERT_GE(id, 0);
          EXPECT_EQ(plan.buffers[id].block, writes[i]);
          EXPECT_TRUE(plan.buffers[id].resident || live.count(id));
          first_write(id, s);
        }
        if (s.workspace != kNoBuffer) {
          EXPECT_TRUE(live.count(s.workspace));
          first_write(s.workspace, s);
        }
        for (BufferId id : s.reads) users_end[id] = std::max(users_end[id], s.end_ms);
        for (BufferId id : s.writes) {
          users_end[id] = std::max(users_end[id], s.end_ms);
          writer_end[id] = s.end_ms;
        }
        if (s.workspace != kNoBuffer) users_end[s.workspace] = s.end_ms;
        break;
      }
    }
    if (s.records != kNoEvent) {
      ASSERT_LT(s.records, plan.event_count);
      EXPECT_FALSE(recorded[s.records]) << "event recorded twice";
      recorded[s.records] = true;
    }
  }
  EXPECT_TRUE(live.empty()) << live.size() << " buffers never freed";
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    if (t == tdfg.update_task) {
      EXPECT_EQ((runs[{t, kOnceRound}]), 1);
      continue;
    }
    for (int32_t r = 0; r < static_cast<int32_t>(plan.sub_batches.size()); ++r) {
      EXPECT_EQ((runs[{t, r}]), 1) << tdfg.tasks[t].name << " round " << r;
    }
  }
  if (tdfg.update_task != kNoTask) {
    const Step* last = nullptr;
    for (const Step& s : plan.steps) {
      if (s.kind == StepKind::compute) last = &s;
    }
    ASSERT_NE(last, nullptr);
    EXPECT_EQ(last->task, tdfg.update_task);
  }
}

// A text of everything decided, to compare two plans.
inline std::string plan_fingerprint(const Plan& plan) {
  std::ostringstream out;
  out << plan.sub_batch << " " << plan.arena_bytes << "\n";
  for (const Buffer& b : plan.buffers) out << b.id << " " << b.block << " " << b.round << " " << b.offset << "\n";
  for (const TaskChoice& c : plan.choices) out << c.task << " " << c.round << " " << c.algorithm << "\n";
  for (const Step& s : plan.steps) {
    out << s.index << " " << step_kind_name(s.kind) << " " << stream_kind_name(s.stream) << " " << s.task
        << " " << s.buffer << " " << s.records << " " << s.start_ms << " " << s.end_ms << " w";
    for (EventId e : s.waits) out << " " << e;
    out << "\n";
  }
  return out.str();
}

}  // namespace mplan::testing
