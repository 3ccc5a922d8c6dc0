#include "codegen/sixteen_bit_calls.h"

#include <map>

#include "core/error.h"

namespace mplan::codegen {
namespace {

// Whether a task adds what it writes through a tensor of this role to the
// tensor's values: parameter gradients always accumulate (runtime/ops.h: the
// update zeroes them); an input's gradient where an earlier consumer of the
// input wrote it first (the TDFG's order); outputs and saved state are written.
bool role_accumulates(const TensorRef& ref, const StepCalls& calls) {
  if (ref.role == TensorRole::weight_grad) return true;
  if (ref.role == TensorRole::input_gradient)
    return ref.index < static_cast<int>(calls.accumulates_input_gradient.size()) &&
           calls.accumulates_input_gradient[ref.index];
  return false;
}

}  // namespace

ModelTypes model_types(const Model& model) { return ModelTypes{layer_types(model), is_16_bit(model.precision)}; }

bool is_16_bit_task(const Model& model, const ModelTypes& types, const Task& task) {
  if (!types.sixteen_bit || task.kind == TaskKind::update || task.layer < 0) return false;
  return op_spec(model.layers.at(task.layer).op).autocast == Autocast::low_precision &&
         types.layers.output.at(task.layer) != DataType::float32;
}

std::vector<CallCasts> call_casts(const Model& model, const Tdfg& tdfg, const Plan& plan, const ModelTypes& types,
                                  const Step& step, const StepCalls& calls) {
  if (!types.sixteen_bit) {
    std::vector<CallCasts> none(calls.invocation.calls.size());
    for (size_t c = 0; c < none.size(); ++c) {
      none[c].operand_of.assign(calls.invocation.calls[c].args.size(), -1);
      none[c].scratch_element.assign(calls.invocation.calls[c].args.size(), 0);
    }
    return none;
  }
  const Task& task = tdfg.tasks.at(step.task);
  const bool low_task = is_16_bit_task(model, types, task);
  // One region per buffer, and one more for a W block's copy.
  std::map<std::pair<BufferId, bool>, int32_t> regions;
  std::vector<SlotStorage> slots(calls.invocation.tensors.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    const TensorRef& ref = calls.invocation.tensors[s];
    if (ref.role == TensorRole::workspace) continue;  // passed as it is
    const BufferId buffer = calls.slot_buffers.at(s);
    const Buffer& b = plan.buffers.at(buffer);
    MPLAN_CHECK(b.block != kNoBlock, "codegen: a tensor slot without a block");
    // A 16-bit op's weights: the copy after the float32 ones.
    const LayerId owner = ref.layer == kModelInput ? task.layer : ref.layer;
    const DataType copy_type = ref.role == TensorRole::weight && low_task ? weight_copy_type(model, types.layers, owner)
                                                                          : DataType::float32;
    const bool copy = copy_type != DataType::float32;
    SlotStorage& slot = slots[s];
    slot.stored = copy ? copy_type : tdfg.blocks.at(b.block).dtype;
    slot.byte_offset = copy ? model.parameter_count(owner) * element_bytes(DataType::float32) : 0;
    slot.region = regions.emplace(std::make_pair(buffer, copy), static_cast<int32_t>(regions.size())).first->second;
    slot.accumulates = role_accumulates(ref, calls);
  }
  return invocation_casts(calls.invocation, slots, low_task, low_precision_type(model.precision));
}

}  // namespace mplan::codegen
