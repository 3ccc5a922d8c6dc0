// The measured timeline of one step (runtime/timeline.h).

#include "runtime/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "runtime/check.h"

namespace mplan::rt {

Timeline::~Timeline() {
  for (Marks& m : marks_) {
    event_destroy(m.before);
    event_destroy(m.after);
  }
  event_destroy(start_);
  event_destroy(end_);
}

void Timeline::begin(Stream* compute) {
  if (start_ == nullptr) start_ = event_create();
  if (end_ == nullptr) end_ = event_create();
  used_ = 0;
  active_ = true;
  event_record(start_, compute);
}

size_t Timeline::open(Kind kind, Stream* stream, int64_t bytes, int32_t event_id) {
  MPLAN_RT_CHECK(active_, "Timeline::open outside a measured step");
  if (used_ == marks_.size()) marks_.push_back(Marks{kind, 0, -1, event_create(), event_create()});
  Marks& m = marks_[used_];
  m.kind = kind;
  m.bytes = bytes;
  m.event_id = event_id;
  event_record(m.before, stream);
  return used_++;
}

void Timeline::close(size_t span, Stream* stream) {
  MPLAN_RT_CHECK(active_ && span < used_, "Timeline::close of a span not opened in this step");
  event_record(marks_[span].after, stream);
}

void Timeline::end(Stream* compute) {
  event_record(end_, compute);
  active_ = false;
}

double Timeline::compute_ms() const {
  return start_ == nullptr || end_ == nullptr ? 0.0 : static_cast<double>(event_elapsed_ms(start_, end_));
}

std::vector<Timeline::Span> Timeline::spans() const {
  std::vector<Span> out;
  if (start_ == nullptr) return out;
  int32_t order[3] = {0, 0, 0};
  for (size_t i = 0; i < used_; ++i) {
    const Marks& m = marks_[i];
    // Elapsed time from the start mark; a copy queued before the compute
    // stream's first kernel can begin a little before it (negative).
    auto since_start = [&](Event* e) { return static_cast<double>(event_elapsed_ms(start_, e)); };
    out.push_back(Span{m.kind, order[static_cast<int>(m.kind)]++, m.bytes, m.event_id, since_start(m.before),
                       since_start(m.after)});
  }
  return out;
}

const char* timeline_kind_name(Timeline::Kind kind) {
  switch (kind) {
    case Timeline::Kind::h2d: return "h2d";
    case Timeline::Kind::d2h: return "d2h";
    case Timeline::Kind::wait: return "wait";
  }
  return "?";
}

namespace {

std::string size_text(int64_t bytes) {
  char text[32];
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib >= 1024)
    std::snprintf(text, sizeof text, "%.2f GiB", mib / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.2f MiB", mib);
  return text;
}

}  // namespace

std::string timeline_summary(const std::vector<Timeline::Span>& spans, double step_ms, double compute_ms,
                             const TimelinePlan& plan) {
  struct Totals {
    int32_t count = 0;
    int64_t bytes = 0;
    double ms = 0;
  } totals[3];
  std::vector<const Timeline::Span*> waits;
  for (const Timeline::Span& s : spans) {
    Totals& t = totals[static_cast<int>(s.kind)];
    ++t.count;
    t.bytes += s.bytes;
    t.ms += std::max(0.0, s.end_ms - s.start_ms);
    if (s.kind == Timeline::Kind::wait) waits.push_back(&s);
  }
  char line[512];
  std::string text;
  const Totals& wait = totals[static_cast<int>(Timeline::Kind::wait)];
  std::snprintf(line, sizeof line,
                "timeline: step %.2f ms on the host, the compute stream's %.2f ms on the device (the plan simulated "
                "%.2f ms); the compute stream waited %.2f ms at %d wait%s (the plan simulated %.2f ms of stall)\n",
                step_ms, compute_ms, plan.simulated_ms, wait.ms, wait.count, wait.count == 1 ? "" : "s",
                plan.stall_ms);
  text += line;
  for (Timeline::Kind kind : {Timeline::Kind::h2d, Timeline::Kind::d2h}) {
    const Totals& t = totals[static_cast<int>(kind)];
    if (t.count == 0) {
      std::snprintf(line, sizeof line, "timeline: %s: no copies\n", timeline_kind_name(kind));
    } else {
      std::snprintf(line, sizeof line, "timeline: %s: %d cop%s, %s in %.2f ms of copying (%.1f GB/s)\n",
                    timeline_kind_name(kind), t.count, t.count == 1 ? "y" : "ies", size_text(t.bytes).c_str(), t.ms,
                    t.ms > 0 ? static_cast<double>(t.bytes) / (t.ms * 1e6) : 0.0);
    }
    text += line;
  }
  std::stable_sort(waits.begin(), waits.end(), [](const Timeline::Span* a, const Timeline::Span* b) {
    return a->end_ms - a->start_ms > b->end_ms - b->start_ms;
  });
  std::string longest;
  for (size_t i = 0; i < waits.size() && i < 3; ++i) {
    std::snprintf(line, sizeof line, "%swait %d on event %d at %.2f ms: %.2f ms", i ? "; " : "", waits[i]->order,
                  waits[i]->event_id, waits[i]->start_ms, waits[i]->end_ms - waits[i]->start_ms);
    longest += line;
  }
  if (!longest.empty()) text += "timeline: longest waits: " + longest + "\n";
  return text;
}

std::string timeline_temporary_name(const std::string& path) { return path + ".partial.XXXXXX"; }

bool write_timeline_csv(const std::string& path, const std::vector<Timeline::Span>& spans, std::string* error) {
  std::string partial = timeline_temporary_name(path);
  const int fd = ::mkstemp(partial.data());
  if (fd < 0) {
    *error = path + ": cannot write the timeline (" + std::strerror(errno) + ")";
    return false;
  }
  std::FILE* out = ::fdopen(fd, "w");
  if (out == nullptr) {
    *error = path + ": cannot write the timeline (" + std::strerror(errno) + ")";
    ::close(fd);
    std::remove(partial.c_str());
    return false;
  }
  bool ok = std::fputs("kind,order,bytes,event,start_ms,end_ms\n", out) >= 0;
  for (const Timeline::Span& s : spans)
    ok = ok && std::fprintf(out, "%s,%d,%" PRId64 ",%d,%.4f,%.4f\n", timeline_kind_name(s.kind), s.order, s.bytes,
                            s.event_id, s.start_ms, s.end_ms) > 0;
  ok = ok && std::fflush(out) == 0 && ::fsync(fd) == 0;
  const int write_errno = errno;
  ok = std::fclose(out) == 0 && ok;
  if (!ok || std::rename(partial.c_str(), path.c_str()) != 0) {
    *error = path + ": " + (ok ? "cannot rename the timeline into place" : "writing the timeline failed") + " (" +
             std::strerror(ok ? errno : write_errno) + ")";
    std::remove(partial.c_str());
    return false;
  }
  return true;
}

}  // namespace mplan::rt
