#pragma once
// GLPK's problem object and terminal output held for one scope (the WD
// optimiser, planner/microbatch/wd_optimizer.h, and Checkmate's MILP,
// planner/checkmate_milp.h).

#include <glpk.h>

#include <memory>

namespace mplan {

struct GlpkProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
using GlpkProblem = std::unique_ptr<glp_prob, GlpkProblemDeleter>;

// Turns GLPK's terminal output on or off for one scope, then restores it.
class GlpkTerminalOutput {
 public:
  explicit GlpkTerminalOutput(bool on) : previous_(glp_term_out(on ? GLP_ON : GLP_OFF)) {}
  ~GlpkTerminalOutput() { glp_term_out(previous_); }
  GlpkTerminalOutput(const GlpkTerminalOutput&) = delete;
  GlpkTerminalOutput& operator=(const GlpkTerminalOutput&) = delete;

 private:
  int previous_;
};

}  // namespace mplan
