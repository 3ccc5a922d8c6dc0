// `mplan inspect DIR/plan.json` (or DIR) [--model model.yaml]: what the
// planner decided, and why it costs what it costs. A summary (model, device,
// sub-batches, memory, simulated vs ideal time, copies, stalls, notes) and a
// per-task table: algorithm and workspace (micro-batches if any), time, the
// stall before it, and the blocks it produces that are offloaded, with the
// task before which each comes back. Names come from the plan (task_names,
// block_names) or, when given, from the model.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cli/command.h"
#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/plan_json.h"
#include "planner/trace.h"
#include "profiler/cost_model.h"
#include "driver/planned_model.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {

namespace {

struct InspectOptions {
  std::string plan_path;
  std::string model_path;
};

// One offloaded block of a task, over all rounds.
struct OffloadRow {
  int32_t offloads = 0;
  int64_t bytes = 0;          // one copy
  std::set<std::string> back_before;  // tasks before which its prefetches are issued
};

struct TaskRow {
  int32_t runs = 0;
  double time_ms = 0;
  double stall_ms = 0;
  // Of those, the recomputations (a forward task run again in the backward
  // pass): their time and the compute stream's wait before them.
  int32_t recomputations = 0;
  double recompute_ms = 0;
  double recompute_stall_ms = 0;
  std::vector<std::string> algorithms;  // distinct, in round order
  int64_t workspace_bytes = 0;          // largest over rounds
  std::string micro_batches;            // of the first round that has any
  std::map<BlockId, OffloadRow> offloaded;
};

std::string micro_text(const TaskChoice& c) {
  std::vector<std::string> parts;
  for (const MicroBatch& m : c.micro_batches) parts.push_back(fmt::format("{}:{}", m.size, m.algorithm));
  return fmt::format("{}", fmt::join(parts, "+"));
}

std::string header_text(const Plan& plan, const std::string& path) {
  const PlanSummary& s = plan.summary;
  std::string out;
  std::vector<std::string> rounds;
  for (int64_t b : plan.sub_batches) rounds.push_back(std::to_string(b));
  out += fmt::format("plan          {} (format {})\n", path, plan.format_version);
  out += fmt::format("model         {} (digest {})\n", plan.model_name, plan.model_digest);
  out += fmt::format("device        {}\n", plan.device);
  out += fmt::format("cost model    {}\n",
                     describe_cost_model({plan.cost_model_kind, plan.math_mode, plan.cost_model_error}));
  out += fmt::format("batch         {} as {} round{} of sub-batch {}: [{}]\n", plan.batch, plan.sub_batches.size(),
                     plan.sub_batches.size() == 1 ? "" : "s", plan.sub_batch, fmt::join(rounds, ", "));
  out += fmt::format("budget        {} = resident {} + arena {}\n", format_bytes_exact(plan.budget_bytes),
                     format_bytes(plan.resident_region_bytes), format_bytes(plan.arena_bytes));
  const double peak_share = plan.arena_bytes > 0 ? 100.0 * s.peak_arena_bytes / plan.arena_bytes : 0.0;
  out += fmt::format("peak          {} of the arena ({:.1f}%), device {} of {}; most live at once {}, "
                     "fragmentation {:.1f}%\n",
                     format_bytes(s.peak_arena_bytes), peak_share,
                     format_bytes(plan.resident_region_bytes + s.peak_arena_bytes), format_bytes(plan.budget_bytes),
                     format_bytes(s.peak_live_bytes), 100.0 * s.fragmentation);
  const double overhead = s.ideal_ms > 0 ? 100.0 * (s.simulated_ms / s.ideal_ms - 1.0) : 0.0;
  out += fmt::format("time          {:.3f} ms simulated, {:.3f} ms ideal: overhead {:+.1f}%\n", s.simulated_ms,
                     s.ideal_ms, overhead);
  out += fmt::format("stalls        {:.3f} ms of compute waiting for copies\n", s.stall_ms);
  out += fmt::format("to host       {} in {} offload{}\n", format_bytes_exact(s.bytes_to_host), s.offload_count,
                     s.offload_count == 1 ? "" : "s");
  out += fmt::format("to device     {} in {} prefetch{}; input data {} in {} load{}\n",
                     format_bytes_exact(s.bytes_to_device), s.prefetch_count, s.prefetch_count == 1 ? "" : "es",
                     format_bytes(s.input_bytes), s.input_load_count, s.input_load_count == 1 ? "" : "s");
  if (s.defragmentation_count > 0) out += fmt::format("defragmented  {} times\n", s.defragmentation_count);
  if (s.move_count > 0)
    out += fmt::format("compacted     {} in {} move{} on the device\n", format_bytes_exact(s.bytes_moved), s.move_count,
                       s.move_count == 1 ? "" : "s");
  std::map<StepKind, int> kinds;
  for (const Step& st : plan.steps) ++kinds[st.kind];
  out += fmt::format("steps         {} ({} compute, {} offload, {} prefetch, {} alloc, {} free{}), {} events, copy "
                     "engines {}\n",
                     plan.steps.size(), kinds[StepKind::compute], kinds[StepKind::offload], kinds[StepKind::prefetch],
                     kinds[StepKind::alloc], kinds[StepKind::free],
                     kinds[StepKind::move] > 0 ? fmt::format(", {} move", kinds[StepKind::move]) : std::string(),
                     plan.event_count, plan.copy_engines);
  out += fmt::format("planner       {:.1f} ms\n", s.planner_ms);
  for (size_t i = 0; i < s.notes.size(); ++i)
    out += fmt::format("{}{}\n", i == 0 ? "notes         " : "              ", s.notes[i]);
  return out;
}

std::string table_text(const Plan& plan) {
  // Rows for the named tasks, or (a plan without names) for task ids up to the
  // number of choices: what is allocated is bounded by what the file holds.
  const size_t tasks = std::max<size_t>(plan.task_names.size(), [&] {
    size_t n = 0;
    for (const TaskChoice& c : plan.choices) n = std::max<size_t>(n, static_cast<size_t>(c.task) + 1);
    return std::min(n, plan.choices.size());
  }());
  std::vector<TaskRow> rows(tasks);
  auto valid_buffer = [&](BufferId id) { return id >= 0 && id < static_cast<BufferId>(plan.buffers.size()); };

  for (const TaskChoice& c : plan.choices) {
    if (c.task < 0 || static_cast<size_t>(c.task) >= tasks) continue;
    TaskRow& row = rows[c.task];
    if (std::find(row.algorithms.begin(), row.algorithms.end(), c.algorithm) == row.algorithms.end())
      row.algorithms.push_back(c.algorithm);
    row.workspace_bytes = std::max(row.workspace_bytes, c.workspace_bytes);
    if (row.micro_batches.empty() && !c.micro_batches.empty()) row.micro_batches = micro_text(c);
  }

  // The producer of each block: the first compute step writing it.
  std::map<BlockId, TaskId> producer;
  // The next compute step at or after each step, in issue order.
  std::vector<int32_t> next_compute(plan.steps.size() + 1, -1);
  for (size_t i = plan.steps.size(); i-- > 0;)
    next_compute[i] = plan.steps[i].kind == StepKind::compute ? static_cast<int32_t>(i) : next_compute[i + 1];
  double compute_end_ms = 0;
  for (const Step& st : plan.steps) {
    if (st.kind != StepKind::compute || st.task < 0 || static_cast<size_t>(st.task) >= tasks) continue;
    TaskRow& row = rows[st.task];
    ++row.runs;
    const double stall_ms = std::max(0.0, st.start_ms - compute_end_ms);
    row.time_ms += st.end_ms - st.start_ms;
    row.stall_ms += stall_ms;
    if (st.recompute) {
      ++row.recomputations;
      row.recompute_ms += st.end_ms - st.start_ms;
      row.recompute_stall_ms += stall_ms;
    }
    compute_end_ms = std::max(compute_end_ms, st.end_ms);
    for (BufferId id : st.writes) {
      if (valid_buffer(id) && plan.buffers[id].block != kNoBlock) producer.emplace(plan.buffers[id].block, st.task);
    }
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    if ((st.kind != StepKind::offload && st.kind != StepKind::prefetch) || !valid_buffer(st.buffer)) continue;
    const BlockId block = plan.buffers[st.buffer].block;
    auto it = producer.find(block);
    if (it == producer.end()) continue;  // input data loads
    OffloadRow& o = rows[it->second].offloaded[block];
    if (st.kind == StepKind::offload) {
      ++o.offloads;
      o.bytes = plan.buffers[st.buffer].bytes;
    } else {
      const int32_t next = next_compute[i + 1];
      o.back_before.insert(next >= 0 ? plan_task_name(plan, plan.steps[next].task) : std::string("the end"));
    }
  }

  struct Line {
    std::string task, algorithm, workspace, time, stall, recomputed, offloaded;
  };
  std::vector<Line> lines;
  lines.push_back({"task", "algorithm", "workspace", "time ms", "stall ms", "recomputed: runs, ms, stall ms",
                   "offloaded (per round) -> back before"});
  for (size_t t = 0; t < tasks; ++t) {
    const TaskRow& row = rows[t];
    Line line;
    line.task = plan_task_name(plan, static_cast<TaskId>(t));
    line.algorithm = fmt::format("{}", fmt::join(row.algorithms, "/"));
    if (!row.micro_batches.empty()) line.algorithm += " [" + row.micro_batches + "]";
    line.workspace = row.workspace_bytes > 0 ? format_bytes(row.workspace_bytes) : "-";
    line.time = fmt::format("{:.3f}", row.time_ms);
    line.stall = row.stall_ms > 1e-9 ? fmt::format("{:.3f}", row.stall_ms) : "-";
    line.recomputed = row.recomputations == 0 ? "-"
                                              : fmt::format("{}, {:.3f}, {}", row.recomputations, row.recompute_ms,
                                                            row.recompute_stall_ms > 1e-9
                                                                ? fmt::format("{:.3f}", row.recompute_stall_ms)
                                                                : "-");
    std::vector<std::string> offloaded;
    for (const auto& [block, o] : row.offloaded) {
      if (o.offloads == 0) continue;
      std::string text = fmt::format("{} {} x{}", plan_block_name(plan, block), format_bytes(o.bytes), o.offloads);
      if (!o.back_before.empty()) text += fmt::format(" -> {}", fmt::join(o.back_before, ", "));
      offloaded.push_back(text);
    }
    line.offloaded = offloaded.empty() ? "-" : fmt::format("{}", fmt::join(offloaded, "; "));
    lines.push_back(std::move(line));
  }
  size_t w[6] = {0, 0, 0, 0, 0, 0};
  for (const Line& l : lines) {
    w[0] = std::max(w[0], l.task.size());
    w[1] = std::max(w[1], l.algorithm.size());
    w[2] = std::max(w[2], l.workspace.size());
    w[3] = std::max(w[3], l.time.size());
    w[4] = std::max(w[4], l.stall.size());
    w[5] = std::max(w[5], l.recomputed.size());
  }
  std::string out = fmt::format("\nper task (time and stall summed over {} round{}, recomputations included; the "
                                "compute stream's wait before a step is its stall):\n",
                                plan.sub_batches.size(), plan.sub_batches.size() == 1 ? "" : "s");
  for (const Line& l : lines) {
    out += fmt::format("{:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", l.task, w[0], l.algorithm, w[1],
                       l.workspace, w[2], l.time, w[3], l.stall, w[4], l.recomputed, w[5], l.offloaded);
  }
  return out;
}

// A data-parallel plan (docs/multi-gpu.md): the ranks, their figures in the
// joint step, the all-reduces and the links' busiest moments.
std::string ranks_text(const Plan& plan) {
  const DataParallel& d = plan.data_parallel;
  if (d.ranks <= 1) return "";
  std::vector<int32_t> same;
  for (int32_t r = 0; r < d.ranks; ++r)
    if (d.plan_of_rank[static_cast<size_t>(r)] == d.rank) same.push_back(r);
  std::string out = "\n";
  out += fmt::format("ranks         {} on {}; global batch {}; this plan is rank {}'s, run by rank{} {}\n", d.ranks,
                     d.machine, d.global_batch, d.rank, same.size() == 1 ? "" : "s", fmt::join(same, ", "));
  out += fmt::format("joint step    {:.3f} ms for all ranks together (this plan alone: {:.3f} ms); policy: {}\n",
                     d.step_ms, plan.summary.simulated_ms, d.policy);
  if (!d.rank_figures.empty()) {
    out += "rank  plan                finish ms  copies ms  alone ms\n";
    for (int32_t r = 0; r < d.ranks; ++r) {
      const RankFigures& f = d.rank_figures[static_cast<size_t>(r)];
      const int32_t runs = d.plan_of_rank[static_cast<size_t>(r)];
      out += fmt::format("{:<5} {:<19} {:>9.3f}  {:>9.3f}  {:>8.3f}\n", r,
                         runs == 0 ? std::string("plan.json") : fmt::format("plan-rank-{}.json", runs), f.finish_ms,
                         f.copy_ms, f.alone_copy_ms);
    }
  }
  int64_t bytes = 0;
  for (const GradientBucket& b : d.buckets) bytes += b.bytes;
  out += fmt::format("all-reduce    {} bucket{} cut at {}, {} in all\n", d.buckets.size(),
                     d.buckets.size() == 1 ? "" : "s", format_bytes(d.bucket_bytes), format_bytes(bytes));
  for (size_t k = 0; k < d.buckets.size(); ++k) {
    const GradientBucket& b = d.buckets[k];
    out += fmt::format("  bucket {:<3} {:>10}  {} block{}, ready after step {}, {:.3f}-{:.3f} ms\n", k,
                       format_bytes(b.bytes), b.blocks.size(), b.blocks.size() == 1 ? "" : "s", b.ready_after_step,
                       b.start_ms, b.end_ms);
  }
  if (!d.links.empty()) {
    out += "busiest links (the most transfers at once, first at; busy time; bytes)\n";
    for (const LinkUse& l : d.links)
      out += fmt::format("  {:<48} {} at {:.3f} ms; busy {:.3f} ms; {} ({})\n", l.link, l.peak_transfers,
                         l.peak_at_ms, l.busy_ms, format_bytes(static_cast<int64_t>(l.bytes)), l.kind);
  }
  return out;
}

void run_inspect(const InspectOptions& o) {
  const std::string path = plan_json_path(o.plan_path);
  Plan plan = unwrap(load_plan(path));
  if (!o.model_path.empty()) {
    const Model model = unwrap(load_model(o.model_path));
    const std::string digest = model_digest(model);
    if (digest != plan.model_digest)
      fail(fmt::format("{} was made for model '{}' (digest {}), but {} has digest {}", path, plan.model_name,
                       plan.model_digest, o.model_path, digest));
    Result<Model> planned = driver::model_as_planned(model, plan);
    if (!planned) fail(fmt::format("{}: {}", path, planned.error().message));
    const Tdfg tdfg = build_tdfg(*planned);
    plan.task_names.clear();
    plan.block_names.clear();
    for (const Task& t : tdfg.tasks) plan.task_names.push_back(t.name);
    for (const Block& b : tdfg.blocks) plan.block_names.push_back(b.name);
  }
  fmt::print("{}{}{}", header_text(plan, path), ranks_text(plan), table_text(plan));
  if (plan.task_names.empty())
    fmt::print("\n(the plan has no task names: pass --model to name tasks and blocks)\n");
}

void setup_inspect(CLI::App& command) {
  auto o = std::make_shared<InspectOptions>();
  command.add_option("plan", o->plan_path, "plan.json, or the folder `mplan compile -o` wrote")->required();
  command.add_option("--model", o->model_path,
                     "The model the plan was made from (optional: names tasks and blocks if the plan has no names)");
  command.callback([o] { run_inspect(*o); });
}

const Registration registration("inspect", "Summarise a plan: what was decided, and what it costs", setup_inspect, 40);

}  // namespace

}  // namespace mplan::cli
