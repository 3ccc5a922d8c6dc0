#pragma once
// plan.json (docs/plan-format.md): the Plan as a versioned, self-contained
// JSON file. Writing then reading gives back an equal Plan (every field,
// doubles to the last bit). The reader refuses anything else with an Error
// that names the file, the line and column or the field path, and what was
// expected: text that is not JSON, another format or version, a missing or
// mistyped field, ids out of range. It never aborts on bad input.

#include <string>

#include "core/error.h"
#include "planner/plan.h"

namespace mplan {

// The file's "format" field; with "format_version" (kPlanFormatVersion) it
// identifies a plan file.
inline constexpr const char* kPlanFormatName = "mplan-plan";

// The plan as JSON text: header fields one per line, then one line per
// choice, buffer, host slot and step, so that plans diff line by line.
std::string plan_to_json(const Plan& plan);

// Parses plan.json text; `file` names it in error messages.
Result<Plan> plan_from_json(const std::string& text, const std::string& file);

// Reads and parses `path` (a missing or unreadable file is an Error).
Result<Plan> load_plan(const std::string& path);

// The plan.json a command-line PLAN argument names: a folder (what `mplan
// compile -o` writes) stands for the plan.json in it, anything else for itself.
std::string plan_json_path(const std::string& plan_json_or_dir);

// Field-by-field equality (doubles compared exactly); used by round-trip tests.
bool plans_equal(const Plan& a, const Plan& b);

}  // namespace mplan
