#include "codegen/sixteen_bit_calls.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "runtime/kernel_extents.h"

namespace mplan::codegen {
namespace {

// The scratch of each operand starts on a 64-byte line.
int64_t align_line(int64_t bytes) { return (bytes + 63) / 64 * 64; }

bool is_float_pointer(rt::ParamType type) { return type == rt::ParamType::const_f32 || type == rt::ParamType::f32; }

// The float operands of a call in one region (a buffer, or a W block's
// 16-bit copy): one scratch per region, so that pointers into one block at
// several offsets (attention's packed q, k and v) see one copy of it.
struct Region {
  BufferId buffer = kNoBuffer;
  bool copy = false;
  int64_t copy_byte_offset = 0;
  DataType stored = DataType::float32;
  int64_t first = 0, end = 0;  // elements
  bool read = false, written = false;
  bool accumulates = false;    // the task adds what it writes here to the block's values
  std::vector<size_t> args;
};

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
  std::vector<CallCasts> result(calls.invocation.calls.size());
  for (size_t c = 0; c < result.size(); ++c) {
    result[c].operand_of.assign(calls.invocation.calls[c].args.size(), -1);
    result[c].scratch_element.assign(calls.invocation.calls[c].args.size(), 0);
  }
  if (!types.sixteen_bit) return result;
  const Task& task = tdfg.tasks.at(step.task);
  const bool low_task = is_16_bit_task(model, types, task);
  const DataType low = low_precision_type(model.precision);
  for (size_t c = 0; c < calls.invocation.calls.size(); ++c) {
    const rt::KernelCall& call = calls.invocation.calls[c];
    CallCasts& casts = result[c];
    const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
    const rt::OperandExtents extents = rt::kernel_extents(call, rt::Bindings{});
    MPLAN_CHECK(extents.error.empty(), "codegen: a kernel call with sizes no kernel takes: " + extents.error);
    std::vector<Region> regions;
    std::map<std::pair<BufferId, bool>, size_t> region_of;
    for (size_t i = 0; i < call.args.size(); ++i) {
      const rt::Arg& arg = call.args[i];
      if (arg.kind != rt::ArgKind::tensor || !is_float_pointer(params[i])) continue;
      const TensorRef& ref = calls.invocation.tensors.at(arg.slot);
      if (ref.role == TensorRole::workspace) continue;  // the plan sizes it for the float kernel
      const BufferId buffer = calls.slot_buffers.at(arg.slot);
      const Buffer& b = plan.buffers.at(buffer);
      MPLAN_CHECK(b.block != kNoBlock, "codegen: a float operand without a block");
      // A 16-bit op's weights: the copy after the float32 ones.
      const LayerId owner = ref.layer == kModelInput ? task.layer : ref.layer;
      const DataType copy_type = ref.role == TensorRole::weight && low_task
                                     ? weight_copy_type(model, types.layers, owner)
                                     : DataType::float32;
      const bool copy = copy_type != DataType::float32;
      auto [it, added] = region_of.emplace(std::make_pair(buffer, copy), regions.size());
      if (added) {
        Region r;
        r.buffer = buffer;
        r.copy = copy;
        r.stored = copy ? copy_type : tdfg.blocks.at(b.block).dtype;
        r.copy_byte_offset = copy ? model.parameter_count(owner) * element_bytes(DataType::float32) : 0;
        r.first = r.end = arg.offset_elements;
        regions.push_back(r);
      }
      Region& r = regions[it->second];
      r.first = std::min(r.first, arg.offset_elements);
      r.end = std::max(r.end, arg.offset_elements + extents.elements[i]);
      const bool writes = params[i] == rt::ParamType::f32;
      if (writes) {
        MPLAN_CHECK(!r.written || r.accumulates == role_accumulates(ref, calls),
                    "codegen: a call both writes and adds to one block");
        r.accumulates = role_accumulates(ref, calls);
      }
      r.written |= writes;
      r.read |= !writes;
      r.args.push_back(i);
    }
    for (const Region& r : regions) {
      // Through scratch: a 16-bit block (or copy), and every float32 block of a
      // 16-bit op (its inputs rounded on the way in, its results on the way
      // out). Otherwise the kernel reads and writes the block itself.
      if (r.stored == DataType::float32 && !low_task) continue;
      CastOperand operand;
      operand.buffer = r.buffer;
      operand.byte_offset = r.copy_byte_offset + r.first * element_bytes(r.stored);
      operand.count = r.end - r.first;
      operand.stored = r.stored;
      operand.written = r.written;
      // A region the call only writes and adds to starts at zero: the kernel
      // then gives its results alone, to be rounded before they are added.
      // (One it reads too, in place, is read and overwritten.)
      operand.adds = r.written && !r.read && r.accumulates;
      operand.zeroed = operand.adds;
      operand.load_rounding = low_task && !r.written ? low : DataType::float32;
      operand.result_type = low_task ? low : r.stored;
      operand.scratch_offset = casts.scratch_bytes;
      casts.scratch_bytes = align_line(casts.scratch_bytes + operand.count * 4);
      for (size_t i : r.args) {
        casts.operand_of[i] = static_cast<int32_t>(casts.operands.size());
        casts.scratch_element[i] = operand.scratch_offset / 4 + (call.args[i].offset_elements - r.first);
      }
      casts.operands.push_back(operand);
    }
  }
  return result;
}

}  // namespace mplan::codegen
