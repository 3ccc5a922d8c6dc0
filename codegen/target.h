#pragma once
// The backend a generated program is built for (`mplan compile --target`), and
// which of its convolution algorithms runs each planned one. A plan names
// algorithms in its cost model's terms (cuDNN's for a GPU device or a GPU
// profile, the CPU runtime's for a CPU profile); the planned algorithm is the
// one that runs, or the program's header and compile's output say which runs
// instead and why — never a silent substitution.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/types.h"

namespace mplan::codegen {

enum class Target { cpu, cuda };
const char* target_name(Target target);  // "cpu", "cuda"
// Inverse of target_name; false if the name is unknown.
bool parse_target(const std::string& name, Target* target);

// Whether a plan's cost model (CostModel::describe(), Plan::device) prices the
// target's own kernels: measured or recorded on that backend, or, for cuda,
// the analytic model of a GPU. "" if it does; else a sentence saying why not.
std::string cost_model_mismatch(const std::string& cost_model, Target target);

// The algorithm that runs a planned one on the target.
struct AlgorithmChoice {
  rt::ConvAlgoId id = 0;
  std::string name;    // the target's name of what runs
  std::string reason;  // "" when it is the planned algorithm; else why another runs
};

// The target's algorithm for `planned` (a name of the plan's cost model) in
// `direction` for `shape`, within `workspace_bytes`. On the CPU the CPU
// runtime decides support and workspace exactly; on CUDA cuDNN decides at run
// time (a planned algorithm whose real workspace does not fit is replaced
// there, and the program says so).
AlgorithmChoice target_algorithm(Target target, const std::string& planned, rt::ConvDirection direction,
                                 const rt::ConvShape& shape, int64_t workspace_bytes);

}  // namespace mplan::codegen
