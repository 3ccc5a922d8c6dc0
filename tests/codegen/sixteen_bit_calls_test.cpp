// The casts around the kernels of a 16-bit program (codegen/sixteen_bit_calls.h):
// where each operand is rounded, which copy of the weights a 16-bit op reads,
// how results are added to what a block holds, and the fp16 program's loss
// scale, on a small bf16 model planned in two rounds.

#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "codegen/sixteen_bit_calls.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"

namespace mplan::codegen {
namespace {

// conv (16-bit op) -> batch norm and relu (follow their 16-bit input) -> its
// output read by a convolution and an add (two consumers: their gradients
// add up) -> linear -> loss.
const char* kModel =
    "name: casts\n"
    "input: [3, 8, 8]\n"
    "batch: 4\n"
    "classes: 10\n"
    "precision: PRECISION\n"
    "layers:\n"
    "  - {name: conv, op: conv, out: 4, kernel: 3, pad: 1}\n"
    "  - {name: bn, op: batchnorm}\n"
    "  - {name: act, op: relu}\n"
    "  - {name: conv2, op: conv, out: 4, kernel: 3, pad: 1}\n"
    "  - {name: sum, op: add, in: [act, conv2]}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n"
    "  - {name: loss, op: softmax_xent}\n";

struct Planned {
  Model model;
  Tdfg tdfg;
  Plan plan;
};

Planned plan_at(const std::string& precision, int64_t sub_batch) {
  std::string text = kModel;
  text.replace(text.find("PRECISION"), 9, precision);
  Planned p;
  Result<Model> model = parse_model(text, "casts.yaml");
  EXPECT_TRUE(model.ok()) << model.error().to_string();
  p.model = *model;
  p.tdfg = build_tdfg(p.model);
  Result<Device> device = load_device("k40");
  EXPECT_TRUE(device.ok());
  PlanOptions options;
  options.budget_bytes = int64_t{1} << 30;
  options.sub_batch = sub_batch;
  Result<Plan> plan = plan_iteration(p.tdfg, AnalyticCostModel(*device), options).take_plan();
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  if (plan.ok()) p.plan = *plan;
  return p;
}

// One call's casts with the step's buffers (a CastOperand names a slot).
struct CallView {
  const StepCalls* calls;
  const CallCasts* casts;
};

// The casts of a step's calls, with the step's buffers.
struct StepCasts {
  StepCalls calls;
  std::vector<CallCasts> casts;
  size_t size() const { return casts.size(); }
  bool empty() const { return casts.empty(); }
  CallView operator[](size_t c) const { return CallView{&calls, &casts.at(c)}; }
  auto begin() const { return casts.begin(); }
  auto end() const { return casts.end(); }
};

// The casts of the first step of `task` (round 0, not a recomputation).
StepCasts casts_of(const Planned& p, const std::string& task) {
  const ChoiceIndex choices(p.plan);
  for (const Step& step : p.plan.steps) {
    if (step.kind != StepKind::compute || step.recompute || step.round > 0 || p.tdfg.tasks[step.task].name != task)
      continue;
    Result<StepCalls> calls = step_calls(p.model, p.tdfg, p.plan, choices, step, Target::cpu);
    EXPECT_TRUE(calls.ok());
    if (!calls.ok()) return {};
    return StepCasts{*calls, call_casts(p.model, p.tdfg, p.plan, model_types(p.model), step, *calls)};
  }
  ADD_FAILURE() << "no step of " << task;
  return {};
}

// The block an operand of a step's call is in.
const Block* block_of(const Planned& p, const StepCalls& calls, const CastOperand& o) {
  const Buffer& b = p.plan.buffers[calls.slot_buffers.at(o.slot)];
  return b.block == kNoBlock ? nullptr : &p.tdfg.blocks[b.block];
}

// The operand a named block's buffer has in a call's casts, or null.
const CastOperand* operand_of(const Planned& p, CallView call, const std::string& block, bool copy = false) {
  for (const CastOperand& o : call.casts->operands) {
    const Block* b = block_of(p, *call.calls, o);
    if (b != nullptr && b->name == block && (o.byte_offset >= 4 * 112) == copy) return &o;
  }
  return nullptr;
}

TEST(SixteenBitCalls, AConvolutionRoundsItsInputsAndReadsTheWeightCopy) {
  const Planned p = plan_at("bf16", 2);
  ASSERT_EQ(p.plan.sub_batches.size(), 2u);
  const StepCasts fp = casts_of(p, "FP(conv)");
  ASSERT_EQ(fp.size(), 1u);
  // The float32 image, rounded to bfloat16 on the way in.
  const CastOperand* x = operand_of(p, fp[0], "X");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->stored, DataType::float32);
  EXPECT_EQ(x->load_rounding, DataType::bfloat16);
  EXPECT_FALSE(x->written);
  // W[conv]: 108 weights and 4 biases in float32, then their bfloat16 copy.
  const CastOperand* w = operand_of(p, fp[0], "W[conv]", /*copy=*/true);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->byte_offset, 112 * 4);
  EXPECT_EQ(w->count, 112);
  EXPECT_EQ(w->stored, DataType::bfloat16);
  EXPECT_EQ(operand_of(p, fp[0], "W[conv]", /*copy=*/false), nullptr) << "a 16-bit op reads the copy only";
  // Its output, computed in float and stored rounded.
  const CastOperand* y = operand_of(p, fp[0], "Y[conv]");
  ASSERT_NE(y, nullptr);
  EXPECT_TRUE(y->written);
  EXPECT_FALSE(y->adds);
  EXPECT_EQ(y->stored, DataType::bfloat16);
  EXPECT_EQ(y->result_type, DataType::bfloat16);
}

TEST(SixteenBitCalls, WeightGradientsAreRoundedThenAddedInFloat32) {
  const Planned p = plan_at("bf16", 2);
  const StepCasts bp2 = casts_of(p, "BP2(conv)");
  ASSERT_FALSE(bp2.empty());
  const CastOperand* dw = operand_of(p, bp2[0], "dW[conv]");
  ASSERT_NE(dw, nullptr);
  // The kernel gives this round's gradient alone (in zeroed scratch); it is
  // rounded to bfloat16, as autocast's weight gradient is, and added to dW.
  EXPECT_TRUE(dw->zeroed);
  EXPECT_TRUE(dw->adds);
  EXPECT_EQ(dw->stored, DataType::float32);
  EXPECT_EQ(dw->result_type, DataType::bfloat16);
}

TEST(SixteenBitCalls, OtherOpsComputeInTheirBlocksType) {
  const Planned p = plan_at("bf16", 2);
  const StepCasts bn = casts_of(p, "FP(bn)");
  ASSERT_FALSE(bn.empty());
  // Batch norm reads its 16-bit input exactly, its float32 parameters and
  // statistics directly, and rounds its output once.
  const CastOperand* x = operand_of(p, bn[0], "Y[conv]");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->load_rounding, DataType::float32);
  EXPECT_EQ(operand_of(p, bn[0], "W[bn]"), nullptr);
  EXPECT_EQ(operand_of(p, bn[0], "state[bn]"), nullptr);
  EXPECT_EQ(operand_of(p, bn[0], "saved[bn]"), nullptr);
  const CastOperand* y = operand_of(p, bn[0], "Y[bn+act]");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->result_type, DataType::bfloat16);
}

TEST(SixteenBitCalls, AGradientOfTwoConsumersIsRoundedBeforeItIsAdded) {
  const Planned p = plan_at("bf16", 2);
  // act's output feeds conv2 and the add: the later of their BP1s adds to
  // dY[conv+bn+act] (batch norm's BP1 writes in place) what it computes,
  // rounded first, and rounds the sum.
  int adding = 0, writing = 0;
  for (const char* task : {"BP1(conv2)", "BP1(sum)"}) {
    const StepCasts step = casts_of(p, task);
    for (const CallCasts& c : step)
      for (const CastOperand& o : c.operands) {
        if (!o.written || block_of(p, step.calls, o)->name != "dY[conv+bn+act]") continue;
        EXPECT_EQ(o.stored, DataType::bfloat16) << task;
        EXPECT_EQ(o.result_type, DataType::bfloat16) << task;
        EXPECT_EQ(o.zeroed, o.adds) << task;
        (o.adds ? adding : writing) += 1;
      }
  }
  EXPECT_EQ(adding, 1);
  EXPECT_EQ(writing, 1);
}

TEST(SixteenBitCalls, Float32ProgramsHaveNoCasts) {
  const Planned p = plan_at("fp32", 2);
  for (const char* task : {"FP(conv)", "BP2(conv)", "FP(bn)", "BP1(sum)"})
    for (const CallCasts& c : casts_of(p, task)) {
      EXPECT_TRUE(c.operands.empty()) << task;
      EXPECT_EQ(c.scratch_bytes, 0) << task;
    }
}

std::string program_text(const Planned& p, Target target = Target::cpu) {
  CodegenOptions options;
  options.target = target;
  Result<GeneratedProgram> program = emit_program(p.model, p.tdfg, p.plan, options);
  EXPECT_TRUE(program.ok()) << program.error().to_string();
  return program.ok() ? program->find("train.cpp")->text : "";
}

TEST(SixteenBitCalls, TheUpdateRemakesTheWeightCopies) {
  const Planned p = plan_at("bf16", 0);
  const std::string text = program_text(p);
  // After the SGD step of each 16-bit layer: its copy, from its float32 weights.
  EXPECT_NE(text.find("cast_from_float(p.compute(), p.f32(resident::W_conv), p.u8(resident::W_conv) + 448, 112, 1, "
                      "0, false);"),
            std::string::npos);
  EXPECT_NE(text.find("cast_from_float(p.compute(), p.f32(resident::W_fc), p.u8(resident::W_fc) + 10280, 2570, 1, 0, "
                      "false);"),
            std::string::npos);
  EXPECT_EQ(text.find("p.u8(resident::W_bn) +"), std::string::npos) << "batch norm keeps no copy";
  EXPECT_NE(text.find(".precision = \"bf16\""), std::string::npos);
  EXPECT_NE(text.find(".loss_scaling = false"), std::string::npos);
  EXPECT_EQ(text.find("p.loss_scale()"), std::string::npos);
  EXPECT_EQ(text.find("unscale_gradients"), std::string::npos);
}

TEST(SixteenBitCalls, Fp16ScalesTheLossAndChecksTheGradients) {
  const Planned p = plan_at("fp16", 0);
  const std::string text = program_text(p);
  EXPECT_NE(text.find(".loss_scaling = true"), std::string::npos);
  // The loss's gradient, scaled before it is rounded to float16.
  EXPECT_NE(text.find(", 4, 10, 0.25f * p.loss_scale(), false, 0.0f);"), std::string::npos);
  // The update runs only where every gradient is finite once unscaled.
  const size_t guard = text.find("if (p.prepare_update()) {");
  ASSERT_NE(guard, std::string::npos);
  EXPECT_GT(text.find("sgd_step(", guard), guard);
  EXPECT_EQ(text.find("sgd_step("), text.find("sgd_step(", guard)) << "an SGD step outside the guard";
}

// CUDA's program calls the 16-bit kernels of its convolutions and linear
// layers (sixteen_bit_kernels.h) where the CPU's brackets the float kernels,
// casts around the other ops on both, and a warning says what that costs.
TEST(SixteenBitCalls, TheCudaTargetCallsSixteenBitKernels) {
  const Planned p = plan_at("bf16", 0);
  CodegenOptions options;
  options.target = Target::cuda;
  Result<GeneratedProgram> program = emit_program(p.model, p.tdfg, p.plan, options);
  ASSERT_TRUE(program.ok()) << program.error().message;
  const std::string cuda = program->find("train.cpp")->text;
  const std::string cpu = program_text(p);
  for (const char* kernel : {"conv_forward_16(", "conv_backward_data_16(", "conv_backward_filter_16(",
                             "linear_forward_16(", "linear_backward_data_16(", "linear_backward_weights_16("}) {
    EXPECT_NE(cuda.find(kernel), std::string::npos) << kernel;
    EXPECT_EQ(cpu.find(kernel), std::string::npos) << kernel;
  }
  EXPECT_EQ(cuda.find("conv_forward(p.compute()"), std::string::npos) << "a float convolution on CUDA";
  EXPECT_NE(cpu.find("conv_forward(p.compute()"), std::string::npos);
  EXPECT_NE(cuda.find("batchnorm_forward"), std::string::npos);
  EXPECT_NE(cuda.find("cast_to_float("), std::string::npos) << "batch norm and the rest between casts";
  ASSERT_FALSE(program->warnings.empty());
  EXPECT_NE(program->warnings.back().find("float scratch"), std::string::npos) << program->warnings.back();
  // Asked, the CPU program calls them too.
  options.target = Target::cpu;
  options.sixteen_bit_kernels_on_cpu = true;
  Result<GeneratedProgram> on_cpu = emit_program(p.model, p.tdfg, p.plan, options);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.error().message;
  EXPECT_NE(on_cpu->find("train.cpp")->text.find("conv_forward_16("), std::string::npos);
}

}  // namespace
}  // namespace mplan::codegen
