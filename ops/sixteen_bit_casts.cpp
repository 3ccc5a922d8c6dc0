#include "ops/sixteen_bit_casts.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "runtime/kernel_extents.h"

namespace mplan {
namespace {

// The scratch of each operand starts on a 64-byte line.
int64_t align_line(int64_t bytes) { return (bytes + 63) / 64 * 64; }

bool is_float_pointer(rt::ParamType type) { return type == rt::ParamType::const_f32 || type == rt::ParamType::f32; }

// The float operands of a call in one region.
struct Region {
  int32_t slot = 0;
  int64_t byte_offset = 0;
  DataType stored = DataType::float32;
  int64_t first = 0, end = 0;  // elements
  bool read = false, written = false;
  bool accumulates = false;
  std::vector<size_t> args;
};

}  // namespace

std::vector<CallCasts> invocation_casts(const Invocation& invocation, const std::vector<SlotStorage>& slots,
                                        bool low_task, DataType low) {
  std::vector<CallCasts> result(invocation.calls.size());
  for (size_t c = 0; c < result.size(); ++c) {
    const rt::KernelCall& call = invocation.calls[c];
    CallCasts& casts = result[c];
    casts.operand_of.assign(call.args.size(), -1);
    casts.scratch_element.assign(call.args.size(), 0);
    const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
    const rt::OperandExtents extents = rt::kernel_extents(call, rt::Bindings{});
    MPLAN_CHECK(extents.error.empty(), "a kernel call with sizes no kernel takes: " + extents.error);
    std::vector<Region> regions;
    std::map<int32_t, size_t> region_of;
    for (size_t i = 0; i < call.args.size(); ++i) {
      const rt::Arg& arg = call.args[i];
      if (arg.kind != rt::ArgKind::tensor || !is_float_pointer(params[i])) continue;
      if (invocation.tensors.at(arg.slot).role == TensorRole::workspace) continue;  // sized for the float kernel
      const SlotStorage& slot = slots.at(arg.slot);
      auto [it, added] = region_of.emplace(slot.region, regions.size());
      if (added) {
        Region r;
        r.slot = arg.slot;
        r.byte_offset = slot.byte_offset;
        r.stored = slot.stored;
        r.first = r.end = arg.offset_elements;
        regions.push_back(r);
      }
      Region& r = regions[it->second];
      r.first = std::min(r.first, arg.offset_elements);
      r.end = std::max(r.end, arg.offset_elements + extents.elements[i]);
      const bool writes = params[i] == rt::ParamType::f32;
      if (writes) {
        MPLAN_CHECK(!r.written || r.accumulates == slot.accumulates, "a call both writes and adds to one block");
        r.accumulates = slot.accumulates;
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
      operand.slot = r.slot;
      operand.byte_offset = r.byte_offset + r.first * element_bytes(r.stored);
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

}  // namespace mplan
