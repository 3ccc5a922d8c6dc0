#pragma once
// The casts around each kernel of a 16-bit program (ops/sixteen_bit_casts.h
// gives the rule; docs/generated-program.md, "16-bit programs"): here the
// step's tensor slots are bound to the plan's buffers, each with its block's
// type, a 16-bit op's weights to the W block's 16-bit copy after the float32
// ones.

#include <cstdint>
#include <vector>

#include "codegen/step_calls.h"
#include "ops/op_table.h"
#include "ops/precision.h"
#include "ops/sixteen_bit_casts.h"

namespace mplan::codegen {

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
// calls.invocation, in order; with no operands at fp32 and tf32). A
// CastOperand's slot is one of calls.slot_buffers.
std::vector<CallCasts> call_casts(const Model& model, const Tdfg& tdfg, const Plan& plan, const ModelTypes& types,
                                  const Step& step, const StepCalls& calls);

}  // namespace mplan::codegen
