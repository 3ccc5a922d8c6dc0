#include "ops/sixteen_bit_invocation.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "ops/sixteen_bit_kernels.h"

namespace mplan {
namespace {

int64_t code(DataType t) { return static_cast<int64_t>(storage_type(t)); }

// A pointer `bytes` into an operand's region of its block, as bytes.
rt::Arg block_bytes(const CastOperand& o, int64_t bytes) { return rt::Arg::tensor(o.slot, o.byte_offset + bytes); }

}  // namespace

CastInvocation with_casts(const Invocation& invocation, const std::vector<CallCasts>& casts, bool sixteen_bit_kernels,
                          DataType low) {
  MPLAN_CHECK(casts.size() == invocation.calls.size(), "with_casts: one CallCasts per call");
  CastInvocation result;
  Invocation& out = result.invocation;
  out.tensors = invocation.tensors;
  const int32_t scratch = static_cast<int32_t>(out.tensors.size());
  out.tensors.push_back(TensorRef{TensorRole::cast_scratch, 0, kModelInput});
  using rt::Arg;
  using rt::Kernel;
  for (size_t c = 0; c < invocation.calls.size(); ++c) {
    const rt::KernelCall& call = invocation.calls[c];
    const CallCasts& cast = casts[c];
    const std::optional<SixteenBitForm> form =
        sixteen_bit_kernels ? sixteen_bit_form(call, cast, low) : std::nullopt;
    if (form) {
      // Float32 inputs, rounded into 16-bit scratch (autocast's casts).
      for (size_t k = 0; k < cast.operands.size(); ++k) {
        const CastOperand& o = cast.operands[k];
        if (o.written || form->operands[k].direct) continue;
        out.call(Kernel::cast_from_float,
                 {Arg::tensor(o.slot, o.byte_offset / 4), Arg::tensor(scratch, form->operands[k].half_offset),
                  Arg::of(o.count), Arg::of(code(low)), Arg::of(code(low)), Arg::of_flag(false)});
      }
      std::vector<Arg> args;
      for (size_t i : form->args) {
        const Arg& arg = call.args[i];
        const int32_t k = arg.kind == rt::ArgKind::tensor ? cast.operand_of[i] : -1;
        if (k < 0) {
          args.push_back(arg);
          continue;
        }
        const CastOperand& o = cast.operands[k];
        const SixteenBitOperand& f = form->operands[k];
        const int64_t element = cast.scratch_element[i] - o.scratch_offset / 4;  // into the operand's region
        args.push_back(f.direct ? block_bytes(o, element * 2) : Arg::tensor(scratch, f.half_offset + element * 2));
      }
      args.push_back(Arg::of(code(low)));
      out.call(form->kernel, std::move(args));
      // Results that do not go straight into their block: widened, then stored or added.
      for (size_t k = 0; k < cast.operands.size(); ++k) {
        const CastOperand& o = cast.operands[k];
        const SixteenBitOperand& f = form->operands[k];
        if (!o.written || f.direct) continue;
        out.call(Kernel::cast_to_float, {Arg::tensor(scratch, f.half_offset), Arg::tensor(scratch, f.float_offset / 4),
                                         Arg::of(o.count), Arg::of(code(low)), Arg::of(int64_t{0})});
        out.call(Kernel::cast_from_float,
                 {Arg::tensor(scratch, f.float_offset / 4), block_bytes(o, 0), Arg::of(o.count),
                  Arg::of(code(o.stored)), Arg::of(code(o.result_type)), Arg::of_flag(o.adds)});
      }
      result.scratch_bytes = std::max(result.scratch_bytes, form->scratch_bytes);
      continue;
    }
    for (const CastOperand& o : cast.operands) {
      if (o.zeroed)
        out.call(Kernel::zero_floats, {Arg::tensor(scratch, o.scratch_offset / 4), Arg::of(o.count)});
      else
        out.call(Kernel::cast_to_float, {block_bytes(o, 0), Arg::tensor(scratch, o.scratch_offset / 4),
                                         Arg::of(o.count), Arg::of(code(o.stored)), Arg::of(code(o.load_rounding))});
    }
    rt::KernelCall bracketed = call;
    for (size_t i = 0; i < bracketed.args.size(); ++i)
      if (cast.operand_of[i] >= 0) bracketed.args[i] = Arg::tensor(scratch, cast.scratch_element[i]);
    out.calls.push_back(std::move(bracketed));
    for (const CastOperand& o : cast.operands)
      if (o.written)
        out.call(Kernel::cast_from_float,
                 {Arg::tensor(scratch, o.scratch_offset / 4), block_bytes(o, 0), Arg::of(o.count),
                  Arg::of(code(o.stored)), Arg::of(code(o.result_type)), Arg::of_flag(o.adds)});
    result.scratch_bytes = std::max(result.scratch_bytes, cast.scratch_bytes);
  }
  return result;
}

}  // namespace mplan
