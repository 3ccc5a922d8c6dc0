#include "codegen/step_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/task_invocation.h"

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

// The block a tensor of task `task` names.
BlockId block_of(const Tdfg& tdfg, const Task& task, const TensorRef& ref) {
  const Model& model = *tdfg.model;
  const LayerId l = ref.layer == kModelInput ? task.layer : ref.layer;
  auto producer_output = [&](LayerId in) { return in == kModelInput ? tdfg.input_block : tdfg.output_of[in]; };
  auto producer_gradient = [&](LayerId in) { return in == kModelInput ? kNoBlock : tdfg.gradient_of[in]; };
  switch (ref.role) {
    case TensorRole::input: return producer_output(model.layers.at(l).inputs.at(ref.index));
    case TensorRole::input_gradient: return producer_gradient(model.layers.at(l).inputs.at(ref.index));
    case TensorRole::output: return tdfg.output_of[l];
    case TensorRole::gradient: return tdfg.gradient_of[l];
    case TensorRole::weight: return tdfg.weight_of[l];
    case TensorRole::weight_grad: return tdfg.weight_grad_of[l];
    case TensorRole::state: return tdfg.state_of[l];
    case TensorRole::saved: return tdfg.saved_of[l];
    case TensorRole::labels: return tdfg.labels_block;
    case TensorRole::loss: return tdfg.loss_block;
    case TensorRole::workspace:
    case TensorRole::cast_scratch: break;
  }
  return kNoBlock;
}

// The buffer the step gives a block: its read, else its write. A recompute
// step lists the buffers of the task's recompute signature (plan.h
// Step::recompute; batch norm reads its saved statistics there).
BufferId buffer_of(const Task& task, const Step& step, BlockId block) {
  const std::vector<BlockId>& reads = step.recompute ? task.recompute_reads : task.reads;
  const std::vector<BlockId>& writes = step.recompute ? task.recompute_writes : task.writes;
  for (size_t i = 0; i < reads.size(); ++i)
    if (reads[i] == block && i < step.reads.size()) return step.reads[i];
  for (size_t i = 0; i < writes.size(); ++i)
    if (writes[i] == block && i < step.writes.size()) return step.writes[i];
  return kNoBuffer;
}

bool contains(const std::vector<BlockId>& list, BlockId b) {
  return b != kNoBlock && std::find(list.begin(), list.end(), b) != list.end();
}

}  // namespace

Result<StepCalls> step_calls(const Model& model, const Tdfg& tdfg, const Plan& plan, const ChoiceIndex& choices,
                             const Step& step, Target target) {
  const Task& task = tdfg.tasks.at(step.task);
  StepCalls result;
  if (task.kind == TaskKind::update) {
    result.invocation = update_invocation(model);
  } else {
    const Layer& layer = model.layers.at(task.layer);
    const std::vector<Shape> inputs = model.input_shapes(task.layer);
    const OpTask op_task{layer, inputs, layer.output, task.kind};
    InvocationContext ctx;
    ctx.samples = plan.sub_batches.at(step.round);
    // The loss is the mean over the global batch: on several ranks, every rank's.
    ctx.batch = plan.data_parallel.ranks > 1 ? plan.data_parallel.global_batch : plan.batch;
    ctx.recompute = step.recompute;
    ctx.evaluation = tdfg.evaluation;
    ctx.optimizer_state_per_parameter = model.optimizer.state_per_parameter();
    for (LayerId in : layer.inputs) {
      const BlockId g = in == kModelInput ? kNoBlock : tdfg.gradient_of[in];
      ctx.writes_input_gradient.push_back(contains(task.writes, g));
      // In place (Task::in_place): dX is written over dY, whose block it
      // shares and reads, never added to it.
      ctx.accumulates_input_gradient.push_back(contains(task.reads, g) && g != tdfg.gradient_of[task.layer]);
    }
    const TaskChoice* choice = choices.find(step.task, step.round);
    ctx.workspace_bytes = step.workspace != kNoBuffer ? plan.buffers.at(step.workspace).bytes : 0;
    if (task.has_algorithms) {
      if (choice == nullptr)
        return codegen_error(fmt::format("step {} ({}) has no algorithm choice in the plan", step.index, task.name));
      // The convolution's direction and shape, from the op table's own call.
      Invocation probe;
      op_spec(layer.op).invoke(op_task, ctx, probe);
      const std::optional<AlgorithmCall> conv = algorithm_call(probe);
      if (!conv) return codegen_error(fmt::format("task {} chooses an algorithm but calls no convolution", task.name));
      if (choice->micro_batches.size() > 1) {
        for (const MicroBatch& m : choice->micro_batches) {
          rt::ConvShape slice = conv->shape;
          slice.n = m.size;
          AlgorithmChoice a = target_algorithm(target, m.algorithm, conv->direction, slice, ctx.workspace_bytes);
          ctx.micro_batches.push_back(rt::ConvMicroBatch{m.size, a.id});
          result.algorithms.push_back(a);
          result.planned.push_back(m.algorithm);
        }
      } else {
        AlgorithmChoice a =
            target_algorithm(target, choice->algorithm, conv->direction, conv->shape, ctx.workspace_bytes);
        ctx.algorithm = a.id;
        result.algorithms.push_back(a);
        result.planned.push_back(choice->algorithm);
      }
    }
    op_spec(layer.op).invoke(op_task, ctx, result.invocation);
    result.accumulates_input_gradient = ctx.accumulates_input_gradient;
  }
  for (const TensorRef& ref : result.invocation.tensors) {
    BufferId buffer = kNoBuffer;
    if (ref.role == TensorRole::workspace) {
      buffer = step.workspace;
    } else {
      const BlockId block = block_of(tdfg, task, ref);
      if (block == kNoBlock)
        return codegen_error(fmt::format("step {} ({}): its {} tensor has no block in the TDFG", step.index, task.name,
                                         tensor_role_name(ref.role)));
      buffer = buffer_of(task, step, block);
      if (buffer == kNoBuffer)
        return codegen_error(fmt::format("step {} ({}) has no buffer for {}", step.index, task.name,
                                         tdfg.blocks[block].name));
    }
    if (buffer == kNoBuffer)
      return codegen_error(fmt::format("step {} ({}) needs a workspace the plan does not give it", step.index, task.name));
    result.slot_buffers.push_back(buffer);
  }
  return result;
}

}  // namespace mplan::codegen
