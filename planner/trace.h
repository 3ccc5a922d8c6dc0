#pragma once
// trace.json: a plan's simulated iteration in the Chrome trace event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open. One track per
// stream (compute, h2d, d2h or the shared copy stream) with one "X" event per
// step, named by task or block; a "C" counter of the arena bytes in use.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"

namespace mplan {

// Arena bytes in use (reserved ranges of live arena buffers) from a given time on.
struct ArenaSample {
  double time_ms = 0;
  int64_t bytes = 0;
};

// The arena use over the iteration: one sample at time 0 and one
// per distinct alloc/free time, in time order (alloc/free take effect at their
// simulated issue time, plan.h).
std::vector<ArenaSample> arena_usage(const Plan& plan);

// Names for a plan's tasks and blocks: Plan::task_names/block_names when
// present, else "task 12" / "block 7".
std::string plan_task_name(const Plan& plan, TaskId task);
std::string plan_block_name(const Plan& plan, BlockId block);
// A stream's track title in a trace: "compute stream", "h2d copy stream (prefetch)", ...
const char* plan_stream_title(StreamKind stream);
// What a step does, e.g. "FP(conv1) r0", "offload Y[conv1] r1", "alloc workspace of BP2(conv2) r0".
std::string plan_step_label(const Plan& plan, const Step& step);

// The trace as a JSON object {"traceEvents": [...], "displayTimeUnit": "ms", ...};
// timestamps in microseconds of simulated time.
std::string plan_to_trace_json(const Plan& plan);

}  // namespace mplan
