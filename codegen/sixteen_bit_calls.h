#pragma once
// The casts around each kernel of a 16-bit program (docs/generated-program.md,
// "16-bit programs"; runtime/ops_casts.h). The kernels compute in float; the
// CPU program brackets each call with casts so that every value a block holds
// is what PyTorch autocast would hold there:
//
//   - a 16-bit operand is read into float scratch, widened exactly;
//   - a 16-bit op (OpSpec::autocast low_precision: convolution, linear,
//     matmul, attention, patch embedding) reads its weights from the W
//     block's 16-bit copy and its float32 inputs rounded to 16 bits
//     (autocast's input casts, fused into the load);
//   - each result is rounded to the type its op computes in (a 16-bit op's:
//     16 bits, its float32 weight gradient included; another op's: the type
//     of the block it writes), then added to the block where the task
//     accumulates (a weight gradient over rounds, a gradient of a tensor with
//     several consumers), and the sum rounded to the block's type.
//
// A float32 block that a call only writes, or reads and is not a 16-bit op,
// is passed to the kernel as it is.

#include <cstdint>
#include <vector>

#include "codegen/step_calls.h"
#include "ops/op_table.h"
#include "ops/precision.h"

namespace mplan::codegen {

// One operand region of a call, in float scratch around the kernel.
struct CastOperand {
  BufferId buffer = kNoBuffer;
  int64_t byte_offset = 0;  // from the buffer's start (the weight copy's place included)
  int64_t count = 0;        // elements
  DataType stored = DataType::float32;
  // Into scratch: zeros (the kernel's results are added to the block after
  // rounding), else the block's values rounded to `load_rounding` (float32: exactly).
  bool zeroed = false;
  DataType load_rounding = DataType::float32;
  // Out of scratch, for an operand the kernel writes: each result rounded to
  // `result_type`, added to the block's value when `adds`, rounded to `stored`.
  bool written = false;
  DataType result_type = DataType::float32;
  bool adds = false;
  int64_t scratch_offset = 0;  // bytes into the float scratch
};

// The casts of one kernel call.
struct CallCasts {
  std::vector<CastOperand> operands;
  // Per argument of the call: the operand it points into (-1: its buffer, directly)...
  std::vector<int32_t> operand_of;
  // ... and its first element's index in that operand's scratch.
  std::vector<int64_t> scratch_element;
  int64_t scratch_bytes = 0;  // the scratch this call needs
};

// What codegen knows of a model's types once.
struct ModelTypes {
  LayerTypes layers;
  bool sixteen_bit = false;
};
ModelTypes model_types(const Model& model);

// Whether a task's kernels are a 16-bit op's (FP, BP1 or BP2 of a layer that
// computes in 16 bits).
bool is_16_bit_task(const Model& model, const ModelTypes& types, const Task& task);

// The casts around each kernel of a compute step (one per call of
// calls.invocation, in order; with no operands at fp32 and tf32).
std::vector<CallCasts> call_casts(const Model& model, const Tdfg& tdfg, const Plan& plan, const ModelTypes& types,
                                  const Step& step, const StepCalls& calls);

}  // namespace mplan::codegen
