#pragma once
// The casts around each kernel of a 16-bit invocation (docs/generated-
// program.md, "16-bit programs"; runtime/ops_casts.h). The kernels compute in
// float; a 16-bit program brackets each call with casts so that every value a
// block holds is what PyTorch autocast would hold there:
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
// is passed to the kernel as it is. The rule works on an invocation's tensor
// slots, so that the program (codegen/sixteen_bit_calls.h binds the slots to
// a plan's buffers) and the profiler (profiler/task_invocation.h binds them
// to a task shape's) cast alike.

#include <cstdint>
#include <vector>

#include "ops/op_table.h"
#include "ops/precision.h"

namespace mplan {

// How one tensor slot of an invocation is stored.
struct SlotStorage {
  DataType stored = DataType::float32;  // the type of the values the slot points at
  int64_t byte_offset = 0;  // where they start past the slot's pointer (a W block's copy: after its float32 weights)
  // Slots of one region (one block, or one W block's copy) share one scratch,
  // so that pointers into a block at several offsets (attention's packed q,
  // k and v) see one copy of it.
  int32_t region = 0;
  bool accumulates = false;  // the task adds what it writes here to the block's values
};

// One operand region of a call, in float scratch around the kernel.
struct CastOperand {
  int32_t slot = 0;         // a slot of the region: its pointer is the region's base
  int64_t byte_offset = 0;  // from the slot's pointer (the weight copy's place included)
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
  // Per argument of the call: the operand it points into (-1: its slot, directly)...
  std::vector<int32_t> operand_of;
  // ... and its first element's index in that operand's scratch.
  std::vector<int64_t> scratch_element;
  int64_t scratch_bytes = 0;  // the scratch this call needs
};

// The casts around each call of `invocation` (one per call, in order), whose
// slots are stored as `slots` say, in a task of a 16-bit op (`low_task`)
// or another, in a model whose 16-bit type is `low`. Workspace slots are
// passed as they are.
std::vector<CallCasts> invocation_casts(const Invocation& invocation, const std::vector<SlotStorage>& slots,
                                        bool low_task, DataType low);

}  // namespace mplan
