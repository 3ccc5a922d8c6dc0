#pragma once
// A call of one runtime kernel (runtime/ops.h) as plain data: which kernel,
// and its arguments after the context, in the kernel's parameter order.
//
// The op table (ops/op_table.h) says once, per op, which kernels a task
// calls and with what; from that one description
//   - codegen prints the call into the generated program (kernel_name and the
//     arguments, tensor slots turned into the plan's buffers),
//   - the CPU profiler and the standalone kernel profiler run it
//     (run_kernel, tensor slots bound to scratch memory),
//   - `mplan profile --jobs` writes it to a job file (kernel_call_json.h).
// run_kernel unpacks the arguments by the kernel's own C++ signature, so the
// list in runtime/kernels.def is the only place a kernel is named; its entry
// also says how much of each tensor the kernel touches (runtime/kernel_extents.h).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/types.h"

namespace mplan::rt {

enum class Kernel : int32_t {
#define MPLAN_KERNEL(name, ...) name,
#include "runtime/kernels.def"
#undef MPLAN_KERNEL
};
inline constexpr int kKernelCount = 0
#define MPLAN_KERNEL(name, ...) +1
#include "runtime/kernels.def"
#undef MPLAN_KERNEL
    ;

const char* kernel_name(Kernel kernel);  // "conv_forward"
// The kernel of that name; false if there is none.
bool kernel_from_name(const std::string& name, Kernel* kernel);

// Values a call takes from the running program rather than from the plan.
enum class Variable : int8_t {
  seed,          // uint64_t: --seed (dropout masks)
  step,          // uint64_t: the iteration (dropout masks)
  lr,            // float: the learning rate (--lr)
  first_update,  // bool: the first update of the run (SGD's momentum starts as the gradient)
  first_sample,  // int64_t: the global index of the round's first sample (dropout masks)
};
const char* variable_name(Variable variable);  // "seed", ...

// What a parameter of a kernel is, from its C++ type.
enum class ParamType : int8_t {
  const_f32, f32, const_i32, i32, const_u8, u8, bytes,  // pointers into device memory
  i64,           // int64_t (sizes, counts, workspace bytes)
  algorithm,     // ConvAlgoId
  real,          // float
  flag,          // bool
  u64,           // uint64_t
  conv_shape,    // const ConvShape&
  pool_shape,    // const PoolShape&
  micro_batches, // MicroBatches
};
const char* param_type_name(ParamType type);
bool is_pointer(ParamType type);
// The element size of a pointer parameter (1 for bytes).
int64_t element_bytes(ParamType type);

// Whether the kernel is a convolution that takes an algorithm (or a list of
// micro-batches), and in which direction.
bool kernel_conv_direction(Kernel kernel, ConvDirection* direction);

// The parameters of a kernel after the context, in order.
const std::vector<ParamType>& kernel_params(Kernel kernel);

enum class ArgKind : int8_t { tensor, null_pointer, integer, real, flag, conv_shape, pool_shape, micro_batches, variable };

// One argument. A tensor names a slot (a buffer the caller binds) and an
// element offset into it; the element type is the parameter's. A null pointer
// fills an optional pointer (no bias, no workspace, no momentum buffer).
struct Arg {
  ArgKind kind = ArgKind::integer;
  int32_t slot = 0;             // tensor
  int64_t offset_elements = 0;  // tensor
  int64_t integer = 0;          // integer (also algorithm ids and sizes)
  double real = 0;              // real
  bool flag = false;            // flag
  ConvShape conv;               // conv_shape
  PoolShape pool;               // pool_shape
  std::vector<ConvMicroBatch> micro;  // micro_batches
  Variable variable = Variable::seed;  // variable

  static Arg tensor(int32_t slot, int64_t offset_elements = 0);
  static Arg null();
  static Arg of(int64_t value);
  static Arg of_real(double value);
  static Arg of_flag(bool value);
  static Arg of(const ConvShape& shape);
  static Arg of(const PoolShape& shape);
  static Arg of(std::vector<ConvMicroBatch> micro);
  static Arg of(Variable variable);
};

struct KernelCall {
  Kernel kernel = Kernel::copy_or_add;
  std::vector<Arg> args;  // one per kernel_params(kernel), in order
};

// Why the call's arguments do not fit the kernel's parameters ("argument 3 of
// relu_forward is a real, the parameter is int64_t"); "" when they do.
// `slot_count` bounds the tensor slots.
std::string check_kernel_call(const KernelCall& call, int32_t slot_count);

// What a call's tensors and variables are bound to when it runs.
struct Bindings {
  void* const* slots = nullptr;  // device pointers, one per slot
  int32_t slot_count = 0;
  uint64_t seed = 1;
  uint64_t step = 0;
  float lr = 0.01f;
  bool first_update = true;
  int64_t first_sample = 0;
};

// Enqueues the call on ctx (runs it at once on the CPU with a null stream).
// The call must pass check_kernel_call; a broken one aborts.
void run_kernel(const Context& ctx, const KernelCall& call, const Bindings& bindings);

}  // namespace mplan::rt
