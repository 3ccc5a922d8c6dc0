// Kernel names, parameter lists and the runner, all derived from
// runtime/kernels.def and the kernels' C++ signatures (runtime/ops.h).

#include "runtime/kernel_call.h"

#include <array>
#include <string_view>
#include <utility>

#include "runtime/check.h"
#include "runtime/kernel_params.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

// ---- one entry per kernel ----------------------------------------------------------------

// The parameter types of a kernel from its declaration alone (no definition
// is needed: names and parameters link without a backend).
template <typename F>
struct Signature;
template <typename... P>
struct Signature<void(const Context&, P...)> {
  static std::vector<ParamType> params() { return {detail::Param<P>::type...}; }
};

struct Entry {
  const char* name;
  std::vector<ParamType> params;
};

const std::array<Entry, kKernelCount>& entries() {
  static const std::array<Entry, kKernelCount> table = {{
#define MPLAN_KERNEL(name, ...) Entry{#name, Signature<decltype(name)>::params()},
#include "runtime/kernels.def"
#undef MPLAN_KERNEL
  }};
  return table;
}

const char* arg_kind_name(ArgKind kind) {
  switch (kind) {
    case ArgKind::tensor: return "tensor";
    case ArgKind::null_pointer: return "null pointer";
    case ArgKind::integer: return "integer";
    case ArgKind::real: return "real";
    case ArgKind::flag: return "flag";
    case ArgKind::conv_shape: return "conv shape";
    case ArgKind::pool_shape: return "pool shape";
    case ArgKind::micro_batches: return "micro-batch list";
    case ArgKind::variable: return "variable";
  }
  return "?";
}

// Whether an argument of this kind can fill a parameter of this type.
bool accepts(ParamType type, const Arg& a) {
  if (is_pointer(type)) return a.kind == ArgKind::tensor || a.kind == ArgKind::null_pointer;
  switch (type) {
    case ParamType::i64:
      return a.kind == ArgKind::integer || (a.kind == ArgKind::variable && a.variable == Variable::first_sample);
    case ParamType::algorithm: return a.kind == ArgKind::integer;
    case ParamType::u64:
      return a.kind == ArgKind::integer ||
             (a.kind == ArgKind::variable && (a.variable == Variable::seed || a.variable == Variable::step));
    case ParamType::real: return a.kind == ArgKind::real || (a.kind == ArgKind::variable && a.variable == Variable::lr);
    case ParamType::flag:
      return a.kind == ArgKind::flag || (a.kind == ArgKind::variable && a.variable == Variable::first_update);
    case ParamType::conv_shape: return a.kind == ArgKind::conv_shape;
    case ParamType::pool_shape: return a.kind == ArgKind::pool_shape;
    case ParamType::micro_batches: return a.kind == ArgKind::micro_batches;
    default: return false;
  }
}

}  // namespace

const char* kernel_name(Kernel kernel) {
  const int index = static_cast<int>(kernel);
  MPLAN_RT_CHECK(index >= 0 && index < kKernelCount, "kernel id out of range");
  return entries()[index].name;
}

bool kernel_from_name(const std::string& name, Kernel* kernel) {
  for (int i = 0; i < kKernelCount; ++i)
    if (name == entries()[i].name) {
      *kernel = static_cast<Kernel>(i);
      return true;
    }
  return false;
}

bool kernel_conv_direction(Kernel kernel, ConvDirection* direction) {
  switch (kernel) {
    case Kernel::conv_forward:
    case Kernel::conv_forward_micro:
    case Kernel::conv_forward_16: *direction = ConvDirection::forward; return true;
    case Kernel::conv_backward_data:
    case Kernel::conv_backward_data_micro:
    case Kernel::conv_backward_data_16: *direction = ConvDirection::backward_data; return true;
    case Kernel::conv_backward_filter:
    case Kernel::conv_backward_filter_micro:
    case Kernel::conv_backward_filter_16: *direction = ConvDirection::backward_filter; return true;
    default: return false;
  }
}

const char* variable_name(Variable variable) {
  switch (variable) {
    case Variable::seed: return "seed";
    case Variable::step: return "step";
    case Variable::lr: return "lr";
    case Variable::first_update: return "first_update";
    case Variable::first_sample: return "first_sample";
  }
  return "?";
}

const char* param_type_name(ParamType type) {
  switch (type) {
    case ParamType::const_f32: return "const float*";
    case ParamType::f32: return "float*";
    case ParamType::const_i32: return "const int32_t*";
    case ParamType::i32: return "int32_t*";
    case ParamType::const_u8: return "const uint8_t*";
    case ParamType::u8: return "uint8_t*";
    case ParamType::bytes: return "void*";
    case ParamType::i64: return "int64_t";
    case ParamType::algorithm: return "ConvAlgoId";
    case ParamType::real: return "float";
    case ParamType::flag: return "bool";
    case ParamType::u64: return "uint64_t";
    case ParamType::conv_shape: return "const ConvShape&";
    case ParamType::pool_shape: return "const PoolShape&";
    case ParamType::micro_batches: return "MicroBatches";
  }
  return "?";
}

bool is_pointer(ParamType type) {
  switch (type) {
    case ParamType::const_f32:
    case ParamType::f32:
    case ParamType::const_i32:
    case ParamType::i32:
    case ParamType::const_u8:
    case ParamType::u8:
    case ParamType::bytes: return true;
    default: return false;
  }
}

int64_t element_bytes(ParamType type) {
  switch (type) {
    case ParamType::const_f32:
    case ParamType::f32:
    case ParamType::const_i32:
    case ParamType::i32: return 4;
    default: return 1;
  }
}

const std::vector<ParamType>& kernel_params(Kernel kernel) {
  const int index = static_cast<int>(kernel);
  MPLAN_RT_CHECK(index >= 0 && index < kKernelCount, "kernel id out of range");
  return entries()[index].params;
}

Arg Arg::tensor(int32_t slot, int64_t offset_elements) {
  Arg a;
  a.kind = ArgKind::tensor;
  a.slot = slot;
  a.offset_elements = offset_elements;
  return a;
}
Arg Arg::null() {
  Arg a;
  a.kind = ArgKind::null_pointer;
  return a;
}
Arg Arg::of(int64_t value) {
  Arg a;
  a.kind = ArgKind::integer;
  a.integer = value;
  return a;
}
Arg Arg::of_real(double value) {
  Arg a;
  a.kind = ArgKind::real;
  a.real = value;
  return a;
}
Arg Arg::of_flag(bool value) {
  Arg a;
  a.kind = ArgKind::flag;
  a.flag = value;
  return a;
}
Arg Arg::of(const ConvShape& shape) {
  Arg a;
  a.kind = ArgKind::conv_shape;
  a.conv = shape;
  return a;
}
Arg Arg::of(const PoolShape& shape) {
  Arg a;
  a.kind = ArgKind::pool_shape;
  a.pool = shape;
  return a;
}
Arg Arg::of(std::vector<ConvMicroBatch> micro) {
  Arg a;
  a.kind = ArgKind::micro_batches;
  a.micro = std::move(micro);
  return a;
}
Arg Arg::of(Variable variable) {
  Arg a;
  a.kind = ArgKind::variable;
  a.variable = variable;
  return a;
}

std::string check_kernel_call(const KernelCall& call, int32_t slot_count) {
  const int index = static_cast<int>(call.kernel);
  if (index < 0 || index >= kKernelCount) return "unknown kernel id " + std::to_string(index);
  const Entry& entry = entries()[index];
  if (call.args.size() != entry.params.size())
    return std::string(entry.name) + " takes " + std::to_string(entry.params.size()) + " arguments after the context, got " +
           std::to_string(call.args.size());
  for (size_t i = 0; i < call.args.size(); ++i) {
    const Arg& a = call.args[i];
    if (!accepts(entry.params[i], a))
      return "argument " + std::to_string(i + 1) + " of " + entry.name + " is a " + arg_kind_name(a.kind) +
             (a.kind == ArgKind::variable ? std::string(" (") + variable_name(a.variable) + ")" : "") +
             ", the parameter is " + param_type_name(entry.params[i]);
    if (a.kind == ArgKind::tensor && (a.slot < 0 || a.slot >= slot_count || a.offset_elements < 0))
      return "argument " + std::to_string(i + 1) + " of " + entry.name + " names slot " + std::to_string(a.slot) +
             " (offset " + std::to_string(a.offset_elements) + ") of " + std::to_string(slot_count);
    if (a.kind == ArgKind::conv_shape && !a.conv.valid())
      return "argument " + std::to_string(i + 1) + " of " + entry.name + " is not a valid convolution shape";
    if (a.kind == ArgKind::micro_batches) {
      int64_t total = 0;
      for (const ConvMicroBatch& m : a.micro) {
        if (m.n < 1) return std::string("a micro-batch of ") + entry.name + " has no images";
        total += m.n;
      }
      if (a.micro.empty()) return std::string(entry.name) + " has an empty micro-batch list";
      for (const Arg& other : call.args)
        if (other.kind == ArgKind::conv_shape && other.conv.n != total)
          return std::string("the micro-batches of ") + entry.name + " add up to " + std::to_string(total) +
                 " images, the shape has " + std::to_string(other.conv.n);
    }
  }
  return "";
}


}  // namespace mplan::rt
