#pragma once
// The standalone kernel profiler's files (docs/profile-format.md, "Measuring
// on a GPU node"): `mplan profile --backend cuda --jobs jobs.json`
// writes the kernels of every distinct task at every sub-batch; the profiler
// (profiler/kernel_profiler, built from the runtime alone) times them on its
// backend and writes a result file; `mplan profile --merge` turns that into
// profile.json. Plain JSON through runtime/json_lite.h.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/kernel_call.h"

namespace mplan::rt {

inline constexpr int kJobFormatVersion = 1;

// One task shape at one sub-batch.
struct Job {
  std::string key;                      // what its result is filed under ("<task signature>@<sub-batch>")
  std::vector<int64_t> slot_bytes;      // the size of each tensor slot
  std::vector<std::string> slot_roles;  // how to fill it: "labels" (class 0), "saved" (positive), else random
  std::vector<KernelCall> calls;        // a convolution's algorithm is varied over the backend's
};

struct JobFile {
  std::string model;                // for people
  // The math the kernels run in: "fp32" or "tf32" (rt::set_math_mode), the
  // model's own, or a 16-bit model's "bf16" or "fp16" (its kernels between
  // casts); the profiler refuses one its backend does not have.
  std::string math = "fp32";
  int32_t warmup = 2;               // untimed runs of each measurement
  int32_t repeats = 10;             // timed runs (the median is kept)
  std::vector<int64_t> copy_sizes;  // pinned copies to time in each direction
  std::vector<Job> jobs;
};

std::string jobs_to_json(const JobFile& jobs);
// Refuses a file that is not a job file, a call whose arguments do not fit its
// kernel, and sizes that are negative or beyond `max_slot_bytes`.
bool parse_jobs(const std::string& text, JobFile* jobs, std::string* error);

struct JobOption {
  std::string algorithm;  // the backend's algorithm name, "default" for a task without algorithms
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};
struct JobResult {
  std::string key;
  std::vector<JobOption> options;  // fastest first; empty with `error`
  std::string error;
};
struct CopyTiming {
  int64_t bytes = 0;
  double host_to_device_ms = 0;
  double device_to_host_ms = 0;
  // An h2d and a d2h of `bytes` each started together on two streams, until
  // both have ended: what a copy has when the other direction runs beside it,
  // as in a plan's offloads and prefetches (0: not measured).
  double both_directions_ms = 0;
};
struct ResultFile {
  BackendInfo backend;
  std::string math = "fp32";  // the math the kernels ran in; files without the field are fp32
  int32_t repeats = 0;
  std::vector<CopyTiming> copies;
  std::vector<JobResult> results;
};

std::string results_to_json(const ResultFile& results);
bool parse_results(const std::string& text, ResultFile* results, std::string* error);

// The argument positions of a convolution call that the profiler varies: the
// algorithm, the workspace pointer and its size; false for other kernels.
bool conv_call_arguments(const KernelCall& call, int* algorithm, int* workspace, int* workspace_bytes);

}  // namespace mplan::rt
