#include "planner/trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/bytes.h"

namespace mplan {

std::vector<ArenaSample> arena_usage(const Plan& plan) {
  struct Change {
    double time_ms;
    int64_t delta;
  };
  std::vector<Change> changes;
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::alloc && step.kind != StepKind::free) continue;
    if (step.buffer < 0 || step.buffer >= static_cast<BufferId>(plan.buffers.size())) continue;
    const Buffer& b = plan.buffers[step.buffer];
    if (b.resident) continue;
    const int64_t bytes = align_up(b.bytes);
    changes.push_back({step.start_ms, step.kind == StepKind::alloc ? bytes : -bytes});
  }
  // Issue order is time order in a well-formed plan; sort anyway (stable) so
  // that a sample never goes back in time.
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.time_ms < b.time_ms; });
  std::vector<ArenaSample> samples;
  samples.push_back({0.0, 0});
  int64_t in_use = 0;
  for (const Change& c : changes) {
    in_use += c.delta;
    if (samples.back().time_ms == c.time_ms)
      samples.back().bytes = in_use;
    else
      samples.push_back({c.time_ms, in_use});
  }
  return samples;
}

std::string plan_task_name(const Plan& plan, TaskId task) {
  if (task >= 0 && task < static_cast<TaskId>(plan.task_names.size())) return plan.task_names[task];
  return fmt::format("task {}", task);
}

std::string plan_block_name(const Plan& plan, BlockId block) {
  if (block >= 0 && block < static_cast<BlockId>(plan.block_names.size())) return plan.block_names[block];
  return fmt::format("block {}", block);
}

namespace {

std::string round_suffix(int32_t round) { return round == kOnceRound ? "" : fmt::format(" r{}", round); }

std::string buffer_label(const Plan& plan, BufferId id) {
  if (id < 0 || id >= static_cast<BufferId>(plan.buffers.size())) return fmt::format("buffer {}", id);
  const Buffer& b = plan.buffers[id];
  if (b.workspace_of != kNoTask) return "workspace of " + plan_task_name(plan, b.workspace_of) + round_suffix(b.round);
  return plan_block_name(plan, b.block) + round_suffix(b.round);
}

int64_t buffer_bytes(const Plan& plan, BufferId id) {
  if (id < 0 || id >= static_cast<BufferId>(plan.buffers.size())) return 0;
  return plan.buffers[id].bytes;
}

// Track ids: fixed per stream, so that traces of different plans line up.
int stream_tid(StreamKind stream) {
  switch (stream) {
    case StreamKind::compute: return 1;
    case StreamKind::h2d: return 2;
    case StreamKind::d2h: return 3;
    case StreamKind::copy: return 4;
    case StreamKind::host: return 5;
  }
  return 5;
}


}  // namespace

const char* plan_stream_title(StreamKind stream) {
  switch (stream) {
    case StreamKind::compute: return "compute stream";
    case StreamKind::h2d: return "h2d copy stream (prefetch)";
    case StreamKind::d2h: return "d2h copy stream (offload)";
    case StreamKind::copy: return "copy stream (offload and prefetch)";
    case StreamKind::host: return "host";
  }
  return "?";
}

std::string plan_step_label(const Plan& plan, const Step& step) {
  switch (step.kind) {
    case StepKind::compute:
      return (step.recompute ? "recompute " : "") + plan_task_name(plan, step.task) + round_suffix(step.round);
    case StepKind::offload: return "offload " + buffer_label(plan, step.buffer);
    case StepKind::prefetch: return "prefetch " + buffer_label(plan, step.buffer);
    case StepKind::alloc: return "alloc " + buffer_label(plan, step.buffer);
    case StepKind::free: return "free " + buffer_label(plan, step.buffer);
    case StepKind::move: return "move " + buffer_label(plan, step.buffer);
  }
  return "?";
}

std::string plan_to_trace_json(const Plan& plan) {
  using Json = nlohmann::json;
  constexpr int kPid = 1;
  // One event per line, written as it is made: a DOM of every event took
  // gigabytes for plans of millions of steps. Readable and diffable, still one
  // JSON object.
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto emit = [&](const Json& event) {
    if (!first) out += ",\n";
    first = false;
    out += event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  emit({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kPid},
                    {"args",
                     {{"name", fmt::format("mplan: {} (budget {}, sub-batch {}, {} round{})", plan.model_name,
                                           format_bytes(plan.budget_bytes), plan.sub_batch,
                                           plan.sub_batches.size(), plan.sub_batches.size() == 1 ? "" : "s")}}}});

  // One track per device stream the plan uses.
  std::vector<StreamKind> streams = {StreamKind::compute};
  if (plan.copy_engines == 1) {
    streams.push_back(StreamKind::copy);
  } else {
    streams.push_back(StreamKind::h2d);
    streams.push_back(StreamKind::d2h);
  }
  for (const Step& step : plan.steps) {
    if (step.stream != StreamKind::host &&
        std::find(streams.begin(), streams.end(), step.stream) == streams.end())
      streams.push_back(step.stream);
  }
  for (StreamKind stream : streams) {
    emit({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", stream_tid(stream)},
                      {"args", {{"name", plan_stream_title(stream)}}}});
    emit({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", stream_tid(stream)},
                      {"args", {{"sort_index", stream_tid(stream)}}}});
  }

  const ChoiceIndex choice_of(plan);
  for (const Step& step : plan.steps) {
    if (step.stream == StreamKind::host) continue;
    Json args = {{"step", step.index}};
    if (step.kind == StepKind::compute) {
      const TaskChoice* choice = choice_of.find(step.task, step.round);
      if (choice != nullptr) {
        args["algorithm"] = choice->algorithm;
        if (choice->workspace_bytes > 0) args["workspace"] = format_bytes(choice->workspace_bytes);
        if (!choice->micro_batches.empty()) args["micro_batches"] = choice->micro_batches.size();
      }
    } else {
      args["bytes"] = buffer_bytes(plan, step.buffer);
      args["size"] = format_bytes(buffer_bytes(plan, step.buffer));
    }
    if (!step.waits.empty()) args["waits"] = step.waits;
    if (step.records != kNoEvent) args["records"] = step.records;
    emit({{"name", plan_step_label(plan, step)},
                      {"cat", step_kind_name(step.kind)},
                      {"ph", "X"},
                      {"pid", kPid},
                      {"tid", stream_tid(step.stream)},
                      {"ts", step.start_ms * 1000.0},
                      {"dur", std::max(0.0, step.end_ms - step.start_ms) * 1000.0},
                      {"args", args}});
  }

  for (const ArenaSample& sample : arena_usage(plan)) {
    emit({{"name", "arena in use (bytes)"},
                      {"ph", "C"},
                      {"pid", kPid},
                      {"ts", sample.time_ms * 1000.0},
                      {"args", {{"bytes", sample.bytes}}}});
  }

  const Json other = {{"model", plan.model_name},
                  {"model_digest", plan.model_digest},
                  {"device", plan.device},
                  {"budget_bytes", plan.budget_bytes},
                  {"arena_bytes", plan.arena_bytes},
                  {"resident_region_bytes", plan.resident_region_bytes},
                  {"sub_batches", plan.sub_batches},
                  {"simulated_ms", plan.summary.simulated_ms},
                     {"time_unit", "simulated microseconds"}};
  out += "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}\n";
  return out;
}

}  // namespace mplan
