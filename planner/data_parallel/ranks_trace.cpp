#include "planner/data_parallel/ranks_trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/bytes.h"
#include "planner/trace.h"

namespace mplan {

namespace {

int stream_track(StreamKind stream) { return static_cast<int>(stream) + 1; }


constexpr int kAllReduceTrack = 9;

}  // namespace

std::string ranks_to_trace_json(const std::vector<const Plan*>& plan_of_rank, const RanksTiming& timing) {
  using Json = nlohmann::json;
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto emit = [&](const Json& event) {
    if (!first) out += ",\n";
    first = false;
    out += event.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  for (size_t r = 0; r < plan_of_rank.size(); ++r) {
    const Plan& plan = *plan_of_rank[r];
    const RankTiming& t = timing.ranks[r];
    const int pid = static_cast<int>(r) + 1;
    emit({{"name", "process_name"},
          {"ph", "M"},
          {"pid", pid},
          {"args", {{"name", fmt::format("rank {}: {} (budget {}, batch {} as {} round{})", r, plan.model_name,
                                         format_bytes(plan.budget_bytes), plan.batch, plan.sub_batches.size(),
                                         plan.sub_batches.size() == 1 ? "" : "s")}}}});
    bool named[kAllReduceTrack + 1] = {};
    for (const Step& step : plan.steps) {
      if (step.stream == StreamKind::host) continue;
      const int tid = stream_track(step.stream);
      if (!named[tid]) {
        emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
              {"args", {{"name", plan_stream_title(step.stream)}}}});
        named[tid] = true;
      }
      const double start = t.start_ms[static_cast<size_t>(step.index)];
      const double end = t.end_ms[static_cast<size_t>(step.index)];
      emit({{"name", plan_step_label(plan, step)},
            {"ph", "X"},
            {"pid", pid},
            {"tid", tid},
            {"ts", start * 1e3},
            {"dur", (end - start) * 1e3},
            {"args", {{"step", step.index}, {"planned_ms", step.end_ms - step.start_ms}}}});
    }
    emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", kAllReduceTrack},
          {"args", {{"name", "all-reduce stream"}}}});
    for (size_t k = 0; k < timing.buckets.size(); ++k) {
      const GradientBucket& b = timing.buckets[k];
      emit({{"name", fmt::format("all-reduce bucket {} ({})", k, format_bytes(b.bytes))},
            {"ph", "X"},
            {"pid", pid},
            {"tid", kAllReduceTrack},
            {"ts", b.start_ms * 1e3},
            {"dur", (b.end_ms - b.start_ms) * 1e3},
            {"args", {{"blocks", b.blocks.size()}, {"bytes", b.bytes}}}});
    }
  }
  out += "\n], \"displayTimeUnit\": \"ms\"}\n";
  return out;
}

}  // namespace mplan
