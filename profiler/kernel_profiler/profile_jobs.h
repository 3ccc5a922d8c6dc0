#pragma once
// The kernel profiler's measurements (docs/profile-format.md, "Measuring on a
// GPU node"): every job of a job file run on this build's runtime backend,
// timed with events on a stream (warm-up runs, then timed repeats, the median
// kept).
// A convolution is timed once per algorithm of the backend that supports its
// shape, each with the workspace the backend asks for; other jobs once, as
// "default". Pinned copies are timed in both directions.

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/jobs.h"

namespace mplan::kernel_profiler {

struct ProfileOptions {
  // Called with a line of progress (for stderr); may be empty.
  std::function<void(const std::string&)> progress;
  // Seconds between two progress lines (the first and last are always given).
  double progress_interval_s = 2.0;
  // When > 0, this many bytes of device memory are overwritten before every
  // timed run, so that each run starts with the device's caches holding none
  // of its operands (--cold-cache); 0 leaves them as the warm-up runs left
  // them.
  int64_t flush_bytes = 0;
};

// Runs every job and copy of the file. A job that cannot run here (its
// memory is not available, its slots are too small for its calls, no
// algorithm runs it) gets an error in its result; the others still run.
rt::ResultFile profile_jobs(const rt::JobFile& jobs, const ProfileOptions& options);

}  // namespace mplan::kernel_profiler
