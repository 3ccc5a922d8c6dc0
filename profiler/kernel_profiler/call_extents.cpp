// The check of a call's tensors against its job's slots, by the operand
// extents runtime/kernels.def gives each kernel (runtime/kernel_extents.h).

#include "profiler/kernel_profiler/call_extents.h"

#include "runtime/kernel_extents.h"

namespace mplan::kernel_profiler {
namespace {

using rt::Arg;
using rt::ArgKind;

// 3211264 -> "3,211,264".
std::string describe(int64_t value) {
  std::string digits = std::to_string(value), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') text += ',';
    text += digits[i];
  }
  return text;
}

}  // namespace

std::string check_call_extents(const rt::KernelCall& call, const std::vector<int64_t>& slot_bytes,
                               const rt::Bindings& bindings) {
  const rt::OperandExtents e = rt::kernel_extents(call, bindings);
  const std::string kernel = rt::kernel_name(call.kernel);
  if (!e.error.empty()) return kernel + ": " + e.error;
  const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
  for (size_t i = 0; i < call.args.size(); ++i) {
    const Arg& a = call.args[i];
    if (e.elements[i] < 0) continue;  // not a pointer
    const std::string which = "argument " + std::to_string(i + 1) + " of " + kernel;
    if (a.kind == ArgKind::null_pointer) {
      if (e.elements[i] == 0 || e.optional[i]) continue;
      return which + " is a null pointer where the kernel reads or writes " + describe(e.elements[i]) + " elements";
    }
    int64_t end = 0, bytes = 0;
    if (e.elements[i] == rt::kTooManyElements || __builtin_add_overflow(a.offset_elements, e.elements[i], &end) ||
        __builtin_mul_overflow(end, rt::element_bytes(params[i]), &bytes))
      return which + " spans more than 2^63 bytes";
    const int64_t have = slot_bytes.at(static_cast<size_t>(a.slot));
    if (bytes > have)
      return which + " spans " + describe(bytes) + " bytes of slot " + std::to_string(a.slot) + " (offset " +
             describe(a.offset_elements) + " elements); the slot has " + describe(have);
  }
  return "";
}

}  // namespace mplan::kernel_profiler
