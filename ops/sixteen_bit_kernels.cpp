#include "ops/sixteen_bit_kernels.h"

namespace mplan {
namespace {

int64_t align_line(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The 16-bit kernel of a float kernel, and whether the float kernel adds to
// its result (its accumulate flag, which the 16-bit kernel drops, or always).
struct Counterpart {
  rt::Kernel kernel;
  int accumulate_arg = -1;     // the float call's accumulate flag, dropped
  bool always_adds = false;    // a weight gradient: the float kernel adds to it
};

std::optional<Counterpart> counterpart(rt::Kernel kernel) {
  using rt::Kernel;
  switch (kernel) {
    case Kernel::conv_forward: return Counterpart{Kernel::conv_forward_16};
    case Kernel::conv_backward_data: return Counterpart{Kernel::conv_backward_data_16, 7};
    case Kernel::conv_backward_filter: return Counterpart{Kernel::conv_backward_filter_16, -1, true};
    case Kernel::linear_forward: return Counterpart{Kernel::linear_forward_16};
    case Kernel::linear_backward_data: return Counterpart{Kernel::linear_backward_data_16, 6};
    case Kernel::linear_backward_weights: return Counterpart{Kernel::linear_backward_weights_16, -1, true};
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<SixteenBitForm> sixteen_bit_form(const rt::KernelCall& call, const CallCasts& casts, DataType low) {
  const std::optional<Counterpart> to = counterpart(call.kernel);
  if (!to || low == DataType::float32 || casts.operands.empty()) return std::nullopt;
  const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
  const bool adds = to->always_adds || (to->accumulate_arg >= 0 && call.args.at(to->accumulate_arg).flag);
  SixteenBitForm form;
  form.kernel = to->kernel;
  for (size_t i = 0; i < call.args.size(); ++i)
    if (static_cast<int>(i) != to->accumulate_arg) form.args.push_back(i);
  // Each operand is only read or only written, and every float tensor is one.
  std::vector<int> reads(casts.operands.size(), 0), writes(casts.operands.size(), 0);
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (params[i] != rt::ParamType::const_f32 && params[i] != rt::ParamType::f32) continue;
    if (call.args[i].kind != rt::ArgKind::tensor) continue;  // a null bias
    const int32_t k = casts.operand_of[i];
    if (k < 0) return std::nullopt;
    ++(params[i] == rt::ParamType::f32 ? writes : reads)[k];
  }
  for (size_t k = 0; k < casts.operands.size(); ++k) {
    const CastOperand& o = casts.operands[k];
    if ((reads[k] > 0) == (writes[k] > 0) || o.written != (writes[k] > 0)) return std::nullopt;
    if (o.stored != DataType::float32 && o.stored != low) return std::nullopt;
    SixteenBitOperand form_operand;
    if (!o.written) {
      if (o.load_rounding != low) return std::nullopt;
      form_operand.direct = o.stored == low;
    } else {
      // What the float kernel adds to must be zeros: its results alone.
      if (adds && !o.zeroed) return std::nullopt;
      if (o.result_type != low) return std::nullopt;
      form_operand.direct = o.stored == low && !o.adds;
    }
    if (!form_operand.direct) {
      form_operand.half_offset = form.scratch_bytes;
      form.scratch_bytes = align_line(form.scratch_bytes + o.count * 2);
      if (o.written) {
        form_operand.float_offset = form.scratch_bytes;
        form.scratch_bytes = align_line(form.scratch_bytes + o.count * 4);
      }
    }
    form.operands.push_back(form_operand);
  }
  return form;
}

}  // namespace mplan
