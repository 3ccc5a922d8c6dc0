// The cost models at 16-bit precision: a task's signature names its type
// where it is not float32 (so a profile measured in 16 bits is looked up by
// it, and a float32 profile keeps its keys), the analytic model moves half
// the bytes for a 16-bit element-wise task, and the update remakes the
// 16-bit weight copies.
#include <gtest/gtest.h>

#include "frontend/parse.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/signature.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

Model model_at(const std::string& precision) {
  Result<Model> r = parse_model("name: t\ninput: [3, 16, 16]\nbatch: 8\nclasses: 10\nprecision: " + precision +
                                    "\nlayers:\n  - {name: conv, op: conv, out: 8, kernel: 3, pad: 1}\n"
                                    "  - {name: act, op: relu}\n  - {name: flat, op: flatten}\n"
                                    "  - {name: fc, op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n",
                                "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return *r;
}

TaskId task_named(const Tdfg& tdfg, const std::string& name) {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    if (tdfg.tasks[t].name == name) return t;
  ADD_FAILURE() << "no task " << name;
  return 0;
}

double bytes_of(const std::vector<KernelWork>& phases) {
  double bytes = 0;
  for (const KernelWork& w : phases) bytes += w.bytes;
  return bytes;
}

TEST(PrecisionCost, SignaturesNameSixteenBitTypesOnly) {
  const Model fp32 = model_at("fp32"), bf16 = model_at("bf16");
  const Tdfg a = build_tdfg(fp32), b = build_tdfg(bf16);
  const TaskShape relu32 = describe_task(a, task_named(a, "BP1(act)"));
  const TaskShape relu16 = describe_task(b, task_named(b, "BP1(act)"));
  EXPECT_EQ(relu16.dtype, DataType::bfloat16);
  EXPECT_EQ(layer_signature(relu16), layer_signature(relu32) + " dtype=bfloat16");
  EXPECT_EQ(layer_signature(relu32).find("dtype"), std::string::npos);
  const TaskShape update16 = describe_task(b, b.update_task);
  EXPECT_EQ(update16.copied_parameters, 8 * 3 * 3 * 3 + 8 + (8 * 16 * 16 + 1) * 10);
  EXPECT_EQ(layer_signature(update16), layer_signature(describe_task(a, a.update_task)) +
                                           " copies=" + std::to_string(update16.copied_parameters));
  // Equal shapes of different types are different keys.
  TaskKeyCache keys;
  EXPECT_NE(keys.key(a, task_named(a, "FP(act)")), keys.key(b, task_named(b, "FP(act)")));
}

TEST(PrecisionCost, TheAnalyticModelMovesHalfTheBytesOfASixteenBitTask) {
  const Model fp32 = model_at("fp32"), bf16 = model_at("bf16");
  const Tdfg a = build_tdfg(fp32), b = build_tdfg(bf16);
  for (const char* name : {"FP(act)", "BP1(act)", "FP(fc)", "BP2(fc)"}) {
    const double full = bytes_of(task_work(describe_task(a, task_named(a, name)), 64));
    const double half = bytes_of(task_work(describe_task(b, task_named(b, name)), 64));
    EXPECT_DOUBLE_EQ(half * 2, full) << name;
  }
  const double update32 = bytes_of(task_work(describe_task(a, a.update_task), 1));
  const double update16 = bytes_of(task_work(describe_task(b, b.update_task), 1));
  EXPECT_DOUBLE_EQ(update16 - update32, 2.0 * describe_task(b, b.update_task).copied_parameters);
}

// Weight copies made where they are used (Model::weight_copies_where_used):
// no copy in W and none remade by the update; each 16-bit op's FP, and its
// BP1 where that reads the weights, casts them instead, which costs the
// cast's time and the copy's bytes of workspace, and is its own key.
TEST(PrecisionCost, CopiesMadeWhereUsedMoveTheCastIntoTheTasks) {
  const Model resident_model = model_at("bf16");
  Model where_used_model = resident_model;
  where_used_model.weight_copies_where_used = true;
  const Tdfg resident = build_tdfg(resident_model), where_used = build_tdfg(where_used_model);
  const int64_t conv_params = 8 * 3 * 3 * 3 + 8, fc_params = (8 * 16 * 16 + 1) * 10;
  EXPECT_EQ(where_used.blocks[where_used.weight_of[0]].fixed_bytes, 4 * conv_params);
  EXPECT_EQ(resident.blocks[resident.weight_of[0]].fixed_bytes, 6 * conv_params);
  EXPECT_EQ(describe_task(where_used, where_used.update_task).copied_parameters, 0);
  EXPECT_EQ(describe_task(where_used, task_named(where_used, "FP(conv)")).copied_parameters, conv_params);
  EXPECT_EQ(describe_task(where_used, task_named(where_used, "BP1(fc)")).copied_parameters, fc_params);
  EXPECT_EQ(describe_task(where_used, task_named(where_used, "BP2(fc)")).copied_parameters, 0) << "BP2 reads no W";
  EXPECT_EQ(describe_task(where_used, task_named(where_used, "FP(act)")).copied_parameters, 0);
  EXPECT_EQ(describe_task(resident, task_named(resident, "FP(conv)")).copied_parameters, 0);
  TaskKeyCache keys;
  EXPECT_NE(keys.key(resident, task_named(resident, "FP(fc)")), keys.key(where_used, task_named(where_used, "FP(fc)")));
  const Result<Device> device = load_device("h100");
  ASSERT_TRUE(device.ok());
  for (const char* name : {"FP(conv)", "FP(fc)", "BP1(fc)"}) {
    const TaskShape kept = describe_task(resident, task_named(resident, name));
    const TaskShape cast = describe_task(where_used, task_named(where_used, name));
    const std::vector<TaskOption> a = analytic_options(*device, kept, 8, MathMode::bf16);
    const std::vector<TaskOption> b = analytic_options(*device, cast, 8, MathMode::bf16);
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(b[i].workspace_bytes, a[i].workspace_bytes + 2 * cast.copied_parameters) << name;
      EXPECT_GT(b[i].time_ms, a[i].time_ms) << name;
    }
  }
}

}  // namespace
}  // namespace mplan
