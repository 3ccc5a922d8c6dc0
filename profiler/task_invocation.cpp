#include "profiler/task_invocation.h"

#include <algorithm>

#include "core/error.h"
#include "ops/sixteen_bit_casts.h"
#include "ops/sixteen_bit_invocation.h"

namespace mplan {
namespace {

constexpr int64_t kFloatBytes = 4;

// The type of input k's block (or, with `gradient`, its gradient's) in a
// 16-bit model's shape; float32 in others.
DataType input_type(const TaskShape& s, int k, bool gradient) {
  const std::vector<DataType>& types = gradient ? s.input_gradient_dtypes : s.input_dtypes;
  return k < static_cast<int>(types.size()) ? types[k] : DataType::float32;
}

// Whether the shape's kernels are a 16-bit op's, which read the W block's
// 16-bit copy where the model keeps one (ops/precision.h; a model that
// makes its copies where they are used casts them in FP and BP1).
bool is_16_bit_shape(const TaskShape& s) {
  return s.kind != TaskKind::update && s.dtype != DataType::float32 &&
         op_spec(s.op).autocast == Autocast::low_precision;
}
bool reads_weight_copy(const TaskShape& s) { return is_16_bit_shape(s) && s.copied_parameters == 0; }

// The storage of each slot of a 16-bit model's task: the casts around its
// kernels follow it (ops/sixteen_bit_casts.h).
SlotStorage slot_storage(const TaskShape& s, const TensorRef& ref, int32_t slot) {
  SlotStorage storage;
  storage.region = slot;
  switch (ref.role) {
    case TensorRole::input: storage.stored = input_type(s, ref.index, false); break;
    case TensorRole::input_gradient: storage.stored = input_type(s, ref.index, true); break;
    case TensorRole::output: storage.stored = s.dtype; break;
    case TensorRole::gradient: storage.stored = s.input_dtypes.empty() ? DataType::float32 : s.gradient_dtype; break;
    case TensorRole::weight:
      if (reads_weight_copy(s)) {
        storage.stored = s.dtype;
        storage.byte_offset = layer_parameter_count(task_layer(s), s.inputs) * kFloatBytes;
      }
      break;
    case TensorRole::weight_grad: storage.accumulates = true; break;  // the update zeroes it
    case TensorRole::saved: storage.stored = is_16_bit_shape(s) ? s.dtype : DataType::float32; break;
    default: break;
  }
  return storage;
}

int64_t slot_bytes(const TaskShape& s, const TensorRef& ref, int64_t n, int64_t workspace_bytes) {
  const Layer layer = task_layer(s);
  const int64_t parameters = s.kind == TaskKind::update ? s.parameters : layer_parameter_count(layer, s.inputs);
  switch (ref.role) {
    case TensorRole::input:
    case TensorRole::input_gradient:
      return s.inputs.at(ref.index).elements() * n *
             element_bytes(input_type(s, ref.index, ref.role == TensorRole::input_gradient));
    case TensorRole::output: return s.output.elements() * n * element_bytes(s.dtype);
    case TensorRole::gradient:
      return s.output.elements() * n * element_bytes(s.input_dtypes.empty() ? DataType::float32 : s.gradient_dtype);
    case TensorRole::weight:
      // The update remakes the 16-bit copies after the float32 weights; a 16-bit op reads its own.
      if (s.kind == TaskKind::update) return parameters * kFloatBytes + s.copied_parameters * 2;
      return parameters * kFloatBytes + (reads_weight_copy(s) ? parameters * element_bytes(s.dtype) : 0);
    case TensorRole::weight_grad: return parameters * kFloatBytes;
    case TensorRole::state:
      // Room for the momentum buffer and non-learnable state both.
      return (s.kind == TaskKind::update ? s.state_elements
                                         : parameters + layer_buffer_count(layer, s.inputs)) * kFloatBytes;
    case TensorRole::saved: {
      const OpSpec& spec = op_spec(s.op);
      SavedBytes saved = spec.saved ? spec.saved(layer, s.inputs, s.output) : SavedBytes{};
      // A 16-bit op keeps its state in its own type (tdfg/tdfg.cpp make_blocks).
      if (is_16_bit_shape(s)) {
        saved.per_sample = saved.per_sample / 4 * element_bytes(s.dtype);
        saved.fixed = saved.fixed / 4 * element_bytes(s.dtype);
      }
      return saved.per_sample * n + saved.fixed;
    }
    case TensorRole::labels: return n * 4;
    case TensorRole::loss: return 4;
    case TensorRole::workspace: return workspace_bytes;
    case TensorRole::cast_scratch: return 0;  // with_casts sizes it
  }
  return 0;
}

TaskInvocation invoke(const TaskShape& shape, int64_t n, rt::ConvAlgoId algorithm, int64_t workspace_bytes,
                      bool sixteen_bit_kernels, bool recompute) {
  TaskInvocation result;
  if (shape.kind == TaskKind::update) {
    // One SGD step per weighted layer, as the program runs it
    // (ops/update.cpp), so that a measured update pays every launch;
    // the shape has the layers' count, not their sizes: balanced slices.
    // (One merged call would time 7 us for 79 layers' update on the H200.)
    Invocation& out = result.invocation;
    const bool momentum = shape.state_elements > 0;
    // AdamW (two state elements a parameter): exp_avg, then exp_avg_sq, each laid out as W.
    const bool adamw = shape.state_elements > shape.parameters;
    const int64_t kernels = std::clamp<int64_t>(shape.tensors, 1, std::max<int64_t>(shape.parameters, 1));
    for (int64_t i = 0; i < kernels; ++i) {
      // Balanced bounds: every slice has at least one parameter (kernels <= parameters).
      const int64_t first = shape.parameters * i / kernels;
      const int64_t count = shape.parameters * (i + 1) / kernels - first;
      if (count == 0) continue;  // no parameters, no kernel (the program has none either)
      if (adamw) {
        out.call(rt::Kernel::adamw_step,
                 {out.tensor(TensorRole::weight, 0, first), out.tensor(TensorRole::weight_grad, 0, first),
                  out.tensor(TensorRole::state, 0, first), out.tensor(TensorRole::state, 0, shape.parameters + first),
                  rt::Arg::of(count), rt::Arg::of(rt::Variable::lr), rt::Arg::of_real(0.9f), rt::Arg::of_real(0.999f),
                  rt::Arg::of_real(1e-8f), rt::Arg::of_real(0.01f), rt::Arg::of(rt::Variable::step)});
        continue;
      }
      out.call(rt::Kernel::sgd_step,
               {out.tensor(TensorRole::weight, 0, first), out.tensor(TensorRole::weight_grad, 0, first),
                momentum ? out.tensor(TensorRole::state, 0, first) : rt::Arg::null(), rt::Arg::of(count),
                rt::Arg::of(rt::Variable::lr), rt::Arg::of_real(momentum ? 0.9 : 0.0), rt::Arg::of_real(0.0),
                rt::Arg::of(rt::Variable::first_update), rt::Arg::of_flag(false)});
    }
    // A 16-bit model's update remakes each resident 16-bit copy from its
    // float32 weights (runtime/program_sixteen_bit.cpp): the shape has their
    // count, timed as that many weights in balanced slices. bfloat16 and
    // float16 cost the same (two bytes, one rounding).
    const int64_t copies = std::clamp<int64_t>(shape.tensors, 1, std::max<int64_t>(shape.copied_parameters, 1));
    for (int64_t i = 0; i < copies && shape.copied_parameters > 0; ++i) {
      const int64_t first = shape.copied_parameters * i / copies;
      const int64_t count = shape.copied_parameters * (i + 1) / copies - first;
      if (count == 0) continue;
      const int64_t bfloat16 = static_cast<int64_t>(rt::StorageType::bfloat16);
      out.call(rt::Kernel::cast_from_float,
               {out.tensor(TensorRole::weight, 0, first),
                out.tensor(TensorRole::weight, 0, shape.parameters * 4 + first * 2), rt::Arg::of(count),
                rt::Arg::of(bfloat16), rt::Arg::of(int64_t{0}), rt::Arg::of_flag(false)});
    }
  } else {
    InvocationContext ctx;
    ctx.samples = n;
    ctx.batch = n;
    ctx.writes_input_gradient.assign(shape.inputs.size(), true);
    ctx.accumulates_input_gradient.assign(shape.inputs.size(), false);
    ctx.algorithm = algorithm;
    ctx.workspace_bytes = workspace_bytes;
    ctx.recompute = recompute;
    const OpSpec& spec = op_spec(shape.op);
    const Layer layer = task_layer(shape);
    const OpTask task{layer, shape.inputs, shape.output, shape.kind, 4, recompute};
    spec.invoke(task, ctx, result.invocation);
    // A kernel's own scratch (batch norm's BP1 per-channel sums) is its
    // workspace slot; a convolution's is the algorithm's, given by the caller.
    if (spec.scratch_bytes && !algorithm_call(result.invocation))
      workspace_bytes = std::max(workspace_bytes, spec.scratch_bytes(task, n));
  }
  for (const TensorRef& ref : result.invocation.tensors)
    result.slot_bytes.push_back(slot_bytes(shape, ref, n, workspace_bytes));
  // A 16-bit model's task: its kernels with the casts its program makes.
  if (shape.kind != TaskKind::update && !shape.input_dtypes.empty()) {
    std::vector<SlotStorage> slots;
    for (size_t i = 0; i < result.invocation.tensors.size(); ++i)
      slots.push_back(slot_storage(shape, result.invocation.tensors[i], static_cast<int32_t>(i)));
    const DataType low = is_16_bit_shape(shape) ? shape.dtype : DataType::float32;
    const std::vector<CallCasts> casts = invocation_casts(result.invocation, slots, is_16_bit_shape(shape), low);
    CastInvocation lowered = with_casts(result.invocation, casts, sixteen_bit_kernels, low);
    result.invocation = std::move(lowered.invocation);
    result.slot_bytes.push_back(lowered.scratch_bytes);
  }
  return result;
}

}  // namespace

TaskInvocation invoke_task_shape(const TaskShape& shape, int64_t n, rt::ConvAlgoId algorithm,
                                 int64_t workspace_bytes, bool sixteen_bit_kernels) {
  return invoke(shape, n, algorithm, workspace_bytes, sixteen_bit_kernels, /*recompute=*/false);
}

TaskInvocation invoke_recomputation(const TaskShape& shape, int64_t n, bool sixteen_bit_kernels) {
  MPLAN_CHECK(shape.kind == TaskKind::FP && !op_spec(shape.op).has_algorithms,
              "invoke_recomputation: an FP task without algorithms");
  return invoke(shape, n, 0, 0, sixteen_bit_kernels, /*recompute=*/true);
}

int64_t task_scratch_bytes(const TaskShape& shape, int64_t b) {
  if (shape.kind == TaskKind::update) return 0;
  const OpSpec& spec = op_spec(shape.op);
  if (spec.scratch_bytes == nullptr || spec.has_algorithms) return 0;
  return spec.scratch_bytes(OpTask{task_layer(shape), shape.inputs, shape.output, shape.kind}, b);
}

std::optional<AlgorithmCall> algorithm_call(const Invocation& invocation) {
  for (const rt::KernelCall& call : invocation.calls) {
    rt::ConvDirection direction;
    if (!rt::kernel_conv_direction(call.kernel, &direction)) continue;
    for (const rt::Arg& arg : call.args)
      if (arg.kind == rt::ArgKind::conv_shape) return AlgorithmCall{direction, arg.conv};
  }
  return std::nullopt;
}

}  // namespace mplan
