#pragma once
// Tests plan with one policy after another over the same options: the
// options with `policy` set, planned (planner/planner.h plan_iteration).

#include "planner/planner.h"

namespace mplan::testing {

inline PlanResult plan_with(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, PlanOptions options) {
  options.policy = policy;
  return plan_iteration(tdfg, cost, options);
}

}  // namespace mplan::testing
