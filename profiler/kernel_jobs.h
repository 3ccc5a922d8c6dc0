#pragma once
// Profiling on a GPU node (docs/design.md, Profiler: "the GPU profiler is a
// standalone program of the runtime and CUDA alone"): the planning machine
// writes a job file of every distinct task's kernels at every sub-batch
// (`mplan profile --jobs`), the kernel profiler (profiler/kernel_profiler)
// times them where the GPU is, and its result file becomes profile.json here
// (`mplan profile --merge`).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "profiler/profile.h"
#include "runtime/jobs.h"
#include "tdfg/tdfg.h"

namespace mplan {

// The key a task's result is filed under: its task signature and sub-batch
// (the update, which does not depend on the sub-batch, at 0).
std::string job_key(const TaskShape& shape, int64_t sub_batch);
// The key of an FP task's recomputation from saved state (batch norm's
// normalisation alone; profiler/task_invocation.h invoke_recomputation).
std::string recompute_job_key(const TaskShape& shape, int64_t sub_batch);

// One job per distinct task signature and sub-batch of the TDFG, one more
// for each FP task that recomputes from saved state, plus copy sizes from
// 64 KiB to 256 MiB. A 16-bit model's jobs are its program's
// calls (profiler/task_invocation.h): the casts, and the 16-bit kernels of
// its convolutions and linear layers where `sixteen_bit_kernels` (the CUDA
// program's; the CPU program brackets the float kernels).
rt::JobFile make_jobs(const Tdfg& tdfg, const std::vector<int64_t>& sub_batches, int32_t repeats, int32_t warmup,
                      bool sixteen_bit_kernels = false);

// The profile of a kernel profiler's results: every task of the TDFG at every
// sub-batch must have a result without an error (else the error names the
// first missing or failed one); copies are fitted by least squares to a line.
// `file` names the result file in messages.
Result<Profile> merge_results(const Tdfg& tdfg, const rt::ResultFile& results, const std::vector<int64_t>& sub_batches,
                              const std::string& file);

}  // namespace mplan
