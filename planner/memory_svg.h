#pragma once
// memory.svg: device memory over one planned iteration, as a self-contained
// SVG (no scripts, fonts or links): the resident region (weights, dW,
// optimizer state) as a band, the arena bytes in use stacked on it as a step
// area over simulated time, the budget and the resident line labelled, axes in
// human units, and a title with the model, budget and sub-batch.

#include <string>

#include "planner/plan.h"

namespace mplan {

std::string plan_memory_svg(const Plan& plan);

}  // namespace mplan
