// Fuzz target: the plan reader (planner/plan_json.h) and, for what it
// accepts, the verifier against the tiny model's TDFG (planner/verify.h):
// `mplan verify` on a hostile plan.json.

#include "planner/plan_json.h"
#include "planner/verify.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mplan::Result<mplan::Plan> plan = mplan::plan_from_json(text, "fuzz.json");
  if (!plan.ok()) {
    (void)plan.error().to_string();
    return 0;
  }
  mplan::VerifiedFigures figures;
  for (const mplan::Violation& v : mplan::verify_plan(*plan, mplan::fuzz::tiny().tdfg, &figures))
    (void)mplan::to_string(v);
  return 0;
}
