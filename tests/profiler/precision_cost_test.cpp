// The cost models at 16-bit precision: a task's signature names its type
// where it is not float32 (so a profile measured in 16 bits is looked up by
// it, and a float32 profile keeps its keys), the analytic model moves half
// the bytes for a 16-bit element-wise task, and the update remakes the
// 16-bit weight copies.
#include <gtest/gtest.h>

#include "frontend/parse.h"
#include "profiler/analytic_model.h"
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

}  // namespace
}  // namespace mplan
