// The cost models at 16-bit precision: a task's signature names its type
// where it is not float32 (so a profile measured in 16 bits is looked up by
// it, and a float32 profile keeps its keys), the analytic model moves half
// the bytes for a 16-bit element-wise task, and the update remakes the
// 16-bit weight copies.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/parse.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/signature.h"
#include "profiler/task_invocation.h"
#include "runtime/kernel_extents.h"
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

// The float32 image a 16-bit convolution reads is named; the 16-bit input of
// a ReLU is the task's own type and is not. An evaluation graph, which has no
// gradient blocks, gives its tasks the training graph's signatures.
TEST(PrecisionCost, SignaturesNameTheBlockTypesThatAreNotTheTasks) {
  const Model bf16 = model_at("bf16");
  const Tdfg training = build_tdfg(bf16);
  TdfgOptions options;
  options.evaluation = true;
  const Tdfg evaluation = build_tdfg(bf16, options);
  const std::string conv = layer_signature(describe_task(training, task_named(training, "FP(conv)")));
  EXPECT_NE(conv.find(" in_types=float32 in_grad_types=float32"), std::string::npos) << conv;
  const std::string act = layer_signature(describe_task(training, task_named(training, "FP(act)")));
  EXPECT_EQ(act.find("types="), std::string::npos) << act;
  for (const char* name : {"FP(conv)", "FP(act)", "FP(fc)", "FP(loss)"})
    EXPECT_EQ(task_signature(describe_task(evaluation, task_named(evaluation, name))),
              task_signature(describe_task(training, task_named(training, name))))
        << name;
}

// Every tensor argument of every call lies within its slot.
void expect_calls_fit(const TaskInvocation& task) {
  for (const rt::KernelCall& call : task.invocation.calls) {
    const rt::OperandExtents e = rt::kernel_extents(call, rt::Bindings{});
    ASSERT_TRUE(e.error.empty()) << rt::kernel_name(call.kernel) << ": " << e.error;
    const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
    for (size_t i = 0; i < call.args.size(); ++i) {
      if (call.args[i].kind != rt::ArgKind::tensor || e.elements[i] < 0) continue;
      EXPECT_LE((call.args[i].offset_elements + e.elements[i]) * rt::element_bytes(params[i]),
                task.slot_bytes.at(call.args[i].slot))
          << rt::kernel_name(call.kernel) << " argument " << i;
    }
  }
}

std::vector<std::string> kernel_names(const TaskInvocation& task) {
  std::vector<std::string> names;
  for (const rt::KernelCall& call : task.invocation.calls) names.push_back(rt::kernel_name(call.kernel));
  return names;
}

// A 16-bit task is timed as its program runs it: its blocks in their types,
// its kernels between casts through a scratch slot of its own role, or, as
// on CUDA, the convolution's 16-bit kernel on the 16-bit operands with the
// float32 image rounded first.
TEST(PrecisionCost, ASixteenBitTaskIsInvokedAsItsProgramCallsIt) {
  const Model bf16 = model_at("bf16");
  const Tdfg tdfg = build_tdfg(bf16);
  const TaskShape conv = describe_task(tdfg, task_named(tdfg, "FP(conv)"));
  const TaskInvocation casts = invoke_task_shape(conv, 4, 0, 0, /*sixteen_bit_kernels=*/false);
  expect_calls_fit(casts);
  EXPECT_EQ(kernel_names(casts), (std::vector<std::string>{"cast_to_float", "cast_to_float", "cast_to_float",
                                                           "conv_forward", "cast_from_float"}));
  ASSERT_EQ(casts.invocation.tensors.back().role, TensorRole::cast_scratch);
  for (size_t i = 0; i < casts.invocation.tensors.size(); ++i) {
    const TensorRef& ref = casts.invocation.tensors[i];
    if (ref.role == TensorRole::input) EXPECT_EQ(casts.slot_bytes[i], 4 * 3 * 16 * 16 * 4) << "the float32 image";
    if (ref.role == TensorRole::output) EXPECT_EQ(casts.slot_bytes[i], 4 * 8 * 16 * 16 * 2) << "bfloat16";
    if (ref.role == TensorRole::weight) EXPECT_EQ(casts.slot_bytes[i], (8 * 27 + 8) * (4 + 2)) << "and its copy";
  }
  const TaskInvocation kernels = invoke_task_shape(conv, 4, 0, 0, /*sixteen_bit_kernels=*/true);
  expect_calls_fit(kernels);
  EXPECT_EQ(kernel_names(kernels), (std::vector<std::string>{"cast_from_float", "conv_forward_16"}));
  // A float32 task of a 16-bit model (the loss) widens its 16-bit input (the
  // logits) and writes its float32 results as they are.
  const TaskShape loss = describe_task(tdfg, task_named(tdfg, "FP(loss)"));
  const std::vector<std::string> loss_kernels = kernel_names(invoke_task_shape(loss, 4, 0, 0));
  EXPECT_EQ(std::count(loss_kernels.begin(), loss_kernels.end(), "cast_to_float"), 1);
  EXPECT_EQ(std::count(loss_kernels.begin(), loss_kernels.end(), "cast_from_float"), 0);
  // The update remakes the weights' 16-bit copies after their SGD steps.
  const TaskInvocation update = invoke_task_shape(describe_task(tdfg, tdfg.update_task), 1, 0, 0);
  expect_calls_fit(update);
  const std::vector<std::string> update_kernels = kernel_names(update);
  EXPECT_GT(std::count(update_kernels.begin(), update_kernels.end(), "cast_from_float"), 0);
  EXPECT_EQ(update_kernels.front(), "sgd_step");
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
