// The digest every rank of a data-parallel program checks at start
// (codegen/data_parallel.h): the same schedule gives the same digest from
// one compile to the next, whatever the planner's wall time, and another
// schedule another digest.

#include <gtest/gtest.h>

#include "codegen/data_parallel.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"

namespace mplan::codegen {
namespace {

Plan small_plan(const Tdfg& tdfg, int64_t sub_batch) {
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  PlanOptions options;
  options.budget_bytes = int64_t{1} << 30;
  options.sub_batch = sub_batch;
  Result<Plan> plan = plan_iteration(tdfg, AnalyticCostModel(*device), options).take_plan();
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  return plan.ok() ? *plan : Plan{};
}

TEST(PlansDigest, IsTheScheduleNotThePlannersWallTime) {
  Result<Model> model = parse_model("name: d\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n"
                                    "  - {op: conv, out: 4, kernel: 3, pad: 1}\n  - {op: relu}\n"
                                    "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n",
                                    "d.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  Plan plan = small_plan(tdfg, 0);
  const std::string digest = plans_digest(plan, {});
  plan.summary.planner_ms += 123.0;
  EXPECT_EQ(plans_digest(plan, {}), digest);
  const Plan other = small_plan(tdfg, 2);
  EXPECT_NE(plans_digest(other, {}), digest);
  EXPECT_NE(plans_digest(plan, {&other}), digest) << "every rank's plan is in it";
}

}  // namespace
}  // namespace mplan::codegen
