// Fuzz target: the profile reader (profiler/profile.h) and, for a profile
// that covers the tiny model, what `mplan compile --profile` does with it:
// the recorded cost model and a plan under a small budget.

#include "planner/planner.h"
#include "profiler/profile.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mplan::Result<mplan::Profile> profile = mplan::parse_profile(text, "fuzz.json");
  if (!profile.ok()) {
    (void)profile.error().to_string();
    return 0;
  }
  const mplan::Tdfg& tdfg = mplan::fuzz::tiny().tdfg;
  if (!mplan::check_profile_reaches_batch(*profile, tdfg.model->batch, "fuzz.json").ok()) return 0;
  auto cost = mplan::RecordedCostModel::create(std::move(profile).value(), tdfg, {}, "fuzz.json");
  if (!cost.ok()) return 0;
  mplan::PlanOptions options;
  options.budget_bytes = int64_t{1} << 20;
  (void)mplan::plan_iteration(tdfg, **cost, options).take_plan();
  return 0;
}
