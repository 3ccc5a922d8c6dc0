#pragma once
// The measured timeline of one training step (train --timeline FILE): every
// copy of the plan between an event before it and one after it on its copy
// stream, every wait of the compute stream between an event before and one
// after it on the compute stream, all timed from an event at the step's start.
// A copy's span is its time on the copy engine while the kernels run, so its
// bytes over it are the bandwidth it really had; a wait's span is how long the
// compute stream stood still for it. plan.json simulates both (its steps'
// start_ms and end_ms, summary.stall_ms): the timeline is what to set beside
// them when a measured step is slower than the simulated one
// (docs/generated-program.md, "Timeline").

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace mplan::rt {

class Timeline {
 public:
  enum class Kind { h2d, d2h, wait };
  // One measured span, in milliseconds from the step's start event.
  struct Span {
    Kind kind;
    int32_t order;     // its place among the step's spans of its kind (plan.json's steps in order)
    int64_t bytes;     // a copy's; 0 for a wait
    int32_t event_id;  // a wait's plan event; -1 for a copy
    double start_ms, end_ms;
  };

  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts measuring a step on the streams of the plan; `compute` marks the start.
  void begin(Stream* compute);
  bool active() const { return active_; }
  // A span opened on `stream` now (an event recorded there) and closed after
  // the copy or wait enqueued in between. Events are reused from step to step.
  size_t open(Kind kind, Stream* stream, int64_t bytes, int32_t event_id);
  void close(size_t span, Stream* stream);
  // Stops measuring, marking the end of the compute stream's work; the spans
  // are read once every stream has finished the step.
  void end(Stream* compute);
  std::vector<Span> spans() const;
  // The compute stream's span of the step on the device (start to end mark).
  double compute_ms() const;

 private:
  struct Marks {
    Kind kind;
    int64_t bytes;
    int32_t event_id;
    Event* before;
    Event* after;
  };
  std::vector<Marks> marks_;  // grows on the first measured step; reused after
  size_t used_ = 0;
  Event* start_ = nullptr;
  Event* end_ = nullptr;
  bool active_ = false;
};

const char* timeline_kind_name(Timeline::Kind kind);  // "h2d", "d2h", "wait"

// The figures a summary sets the measurement beside: the plan's.
struct TimelinePlan {
  double simulated_ms = 0;  // summary.simulated_ms
  double stall_ms = 0;      // summary.stall_ms
};
// One paragraph for people: the step (on the host, and the compute stream's
// span on the device), the compute stream's waits against the plan's stall,
// each copy direction's count, bytes, time and bandwidth, the longest waits.
std::string timeline_summary(const std::vector<Timeline::Span>& spans, double step_ms, double compute_ms,
                             const TimelinePlan& plan);
// The spans as CSV (kind,order,bytes,event,start_ms,end_ms), written to a
// temporary file of its own (timeline_temporary_name) renamed over `path`:
// false with *error, and no file, on failure.
bool write_timeline_csv(const std::string& path, const std::vector<Timeline::Span>& spans, std::string* error);
// mkstemp's template of a temporary file beside `path`.
std::string timeline_temporary_name(const std::string& path);

}  // namespace mplan::rt
