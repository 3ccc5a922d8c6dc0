#pragma once
// What codegen requires of a plan before it writes a program (codegen-internal).

#include "codegen/codegen.h"

namespace mplan::codegen {

// A plan codegen can express for this model: same digest, steps whose
// buffers match their tasks, a host slot for every round's input and labels.
Status check_plan(const Model& model, const Tdfg& tdfg, const Plan& plan);

}  // namespace mplan::codegen
