#include "profiler/task_invocation.h"

#include <algorithm>

#include "core/error.h"

namespace mplan {
namespace {

constexpr int64_t kFloatBytes = 4;

int64_t slot_bytes(const TaskShape& s, const TensorRef& ref, int64_t n, int64_t workspace_bytes) {
  const Layer layer = task_layer(s);
  const int64_t parameters = s.kind == TaskKind::update ? s.parameters : layer_parameter_count(layer, s.inputs);
  switch (ref.role) {
    case TensorRole::input:
    case TensorRole::input_gradient: return s.inputs.at(ref.index).elements() * n * kFloatBytes;
    case TensorRole::output:
    case TensorRole::gradient: return s.output.elements() * n * kFloatBytes;
    case TensorRole::weight:
    case TensorRole::weight_grad: return parameters * kFloatBytes;
    case TensorRole::state:
      // Room for the momentum buffer and non-learnable state both.
      return (s.kind == TaskKind::update ? s.state_elements
                                         : parameters + layer_buffer_count(layer, s.inputs)) * kFloatBytes;
    case TensorRole::saved: {
      const OpSpec& spec = op_spec(s.op);
      const SavedBytes saved = spec.saved ? spec.saved(layer, s.inputs, s.output) : SavedBytes{};
      return saved.per_sample * n + saved.fixed;
    }
    case TensorRole::labels: return n * 4;
    case TensorRole::loss: return 4;
    case TensorRole::workspace: return workspace_bytes;
  }
  return 0;
}

}  // namespace

TaskInvocation invoke_task_shape(const TaskShape& shape, int64_t n, rt::ConvAlgoId algorithm,
                                 int64_t workspace_bytes) {
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
  } else {
    InvocationContext ctx;
    ctx.samples = n;
    ctx.batch = n;
    ctx.writes_input_gradient.assign(shape.inputs.size(), true);
    ctx.accumulates_input_gradient.assign(shape.inputs.size(), false);
    ctx.algorithm = algorithm;
    ctx.workspace_bytes = workspace_bytes;
    const OpSpec& spec = op_spec(shape.op);
    const Layer layer = task_layer(shape);
    const OpTask task{layer, shape.inputs, shape.output, shape.kind};
    spec.invoke(task, ctx, result.invocation);
    // A kernel's own scratch (batch norm's BP1 per-channel sums) is its
    // workspace slot; a convolution's is the algorithm's, given by the caller.
    if (spec.scratch_bytes && !algorithm_call(result.invocation))
      workspace_bytes = std::max(workspace_bytes, spec.scratch_bytes(task, n));
  }
  for (const TensorRef& ref : result.invocation.tensors)
    result.slot_bytes.push_back(slot_bytes(shape, ref, n, workspace_bytes));
  return result;
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
