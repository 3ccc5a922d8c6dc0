#pragma once
// A task shape's kernels with buffers to bind them to: what the CPU profiler
// times and what `mplan profile --jobs` writes for the standalone kernel
// profiler (docs/design.md, Profiler). The kernels come from the op table
// (ops/op_table.h), exactly as codegen prints them.

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/op_table.h"
#include "profiler/signature.h"
#include "runtime/kernel_call.h"

namespace mplan {

struct TaskInvocation {
  Invocation invocation;
  std::vector<int64_t> slot_bytes;  // the size of each tensor slot
};

// The kernels of `shape` at sub-batch n: convolutions by `algorithm` (an id of
// the backend that runs them) with `workspace_bytes` of workspace; other tasks
// with their scratch. BP1 writes (never adds to) every input gradient.
// A 16-bit model's task runs as its program runs it (ops/sixteen_bit_invocation.h):
// slots in their blocks' types, the kernels between casts through one more
// slot of float scratch (TensorRole::cast_scratch), a 16-bit op's
// convolutions and linear layers as their 16-bit kernels where
// `sixteen_bit_kernels` (the CUDA program's). Its update remakes the 16-bit
// weight copies.
TaskInvocation invoke_task_shape(const TaskShape& shape, int64_t n, rt::ConvAlgoId algorithm,
                                 int64_t workspace_bytes, bool sixteen_bit_kernels = false);

// The kernels of an FP task (of an op without algorithms) run again from
// what it saved (InvocationContext::recompute): batch norm's normalisation
// with the saved statistics. What the kernel profiler and the CPU profiler
// time as the task's recomputation (CostModel::recompute_from_saved_ms).
TaskInvocation invoke_recomputation(const TaskShape& shape, int64_t n, bool sixteen_bit_kernels = false);

// The scratch a task of an op without algorithms needs at sub-batch b (the op
// table's scratch_bytes: batch norm's BP1 sums, attention's BP1 row sums);
// 0 for the update and for ops with none. A plan gives it as the task's
// workspace, whatever the cost model's options say.
int64_t task_scratch_bytes(const TaskShape& shape, int64_t b);

// The convolution of an invocation whose algorithm is chosen: its direction and
// shape; nothing for a task without algorithms.
struct AlgorithmCall {
  rt::ConvDirection direction = rt::ConvDirection::forward;
  rt::ConvShape shape;
};
std::optional<AlgorithmCall> algorithm_call(const Invocation& invocation);

}  // namespace mplan
