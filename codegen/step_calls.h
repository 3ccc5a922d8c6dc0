#pragma once
// The kernels of one compute step of a plan: the op table's invocation of the
// step's task (ops/op_table.h) with its tensors bound to the step's
// buffers, and the target's algorithm for each planned convolution.

#include <string>
#include <vector>

#include "codegen/target.h"
#include "core/error.h"
#include "ops/op_table.h"
#include "planner/plan.h"
#include "tdfg/tdfg.h"

namespace mplan::codegen {

struct StepCalls {
  Invocation invocation;
  std::vector<BufferId> slot_buffers;  // the buffer of each tensor slot
  // The target's algorithm of each planned one (micro-batches in order), with
  // the reason when it is another.
  std::vector<AlgorithmChoice> algorithms;
  std::vector<std::string> planned;    // the plan's names, in the same order
  // BP1: per input of the layer, whether the task adds its gradient to what
  // an earlier consumer wrote (InvocationContext::accumulates_input_gradient).
  std::vector<bool> accumulates_input_gradient;
};

// The kernels of compute step `step` (of task step.task in step.round).
// Error: a step whose buffers do not cover its task's tensors.
Result<StepCalls> step_calls(const Model& model, const Tdfg& tdfg, const Plan& plan, const ChoiceIndex& choices,
                             const Step& step, Target target);

}  // namespace mplan::codegen
