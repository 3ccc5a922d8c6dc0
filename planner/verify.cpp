#include "planner/verify.h"

#include <fmt/format.h>

#include "planner/verify/verifier.h"

namespace mplan {

const char* violation_kind_name(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::header: return "header";
    case ViolationKind::budget: return "budget";
    case ViolationKind::overlap: return "overlap";
    case ViolationKind::bad_step: return "bad_step";
    case ViolationKind::coverage: return "coverage";
    case ViolationKind::absent: return "absent";
    case ViolationKind::use_after_free: return "use_after_free";
    case ViolationKind::unproduced: return "unproduced";
    case ViolationKind::unprefetched: return "unprefetched";
    case ViolationKind::stale: return "stale";
    case ViolationKind::overwrite: return "overwrite";
    case ViolationKind::copy_unready: return "copy_unready";
    case ViolationKind::update_early: return "update_early";
    case ViolationKind::event: return "event";
    case ViolationKind::timing: return "timing";
    case ViolationKind::chain: return "chain";
    case ViolationKind::gradient_buckets: return "gradient_buckets";
  }
  return "?";
}

std::string to_string(const Violation& v) {
  if (v.step < 0) return fmt::format("plan: {}: {}", violation_kind_name(v.kind), v.message);
  return fmt::format("step {}: {}: {}", v.step, violation_kind_name(v.kind), v.message);
}

std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg) { return verifier::Verifier(plan, tdfg).run(); }

std::vector<Violation> verify_plan(const Plan& plan, const Tdfg& tdfg, VerifiedFigures* figures) {
  verifier::Verifier v(plan, tdfg);
  std::vector<Violation> violations = v.run();
  if (figures != nullptr) *figures = v.figures();
  return violations;
}

}  // namespace mplan
