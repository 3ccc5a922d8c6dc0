// attention: multi-head scaled dot-product attention as one op,
// softmax(Q K^T * scale) V per head (torch's multi_head_attention_forward
// between its in- and out-projections, F.scaled_dot_product_attention).
// Inputs: one [T, 3D] tensor, the packed in-projection [q | k | v] (ViT's
// nn.MultiheadAttention), or three, q [Tq, D], k [Tk, D] and v [Tk, D].
// Output [Tq, D], heads side by side. Fields: heads (dividing D); scale
// (default 1/sqrt(D / heads)).
//
// The attention matrix, heads * Tq * Tk floats per sample, is the saved block
// FP leaves for BP (what makes long sequences expensive), so the planner sees
// it as it sees any activation: kept, offloaded, or recomputed from Q, K, V.
// BP1 reads Q, K, V and the saved matrix and needs a scratch matrix per head.

#include <cmath>

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.heads = r.required_int("heads", 1);
  layer.scale = r.optional_double("scale", 0.0);
  if (!(layer.scale >= 0) || !std::isfinite(layer.scale))
    r.fail(r.get("scale"), fmt::format("scale must be a positive number (or 0: 1/sqrt(head size)), got {}",
                                       layer.scale));
}

// The sizes the kernels see.
struct Geometry {
  int64_t tq = 1, tk = 1, dim = 1, head_dim = 1, q_stride = 1, kv_stride = 1;
  int64_t k_offset = 0, v_offset = 0;  // packed: k and v columns after q's
  bool packed = false;
};
Geometry geometry_of(const Layer& layer, const std::vector<Shape>& inputs) {
  Geometry g;
  g.packed = inputs.size() == 1;
  const Shape& q = inputs.at(0);
  g.tq = q.dims.at(0);
  if (g.packed) {
    g.dim = q.dims.at(1) / 3;
    g.tk = g.tq;
    g.q_stride = g.kv_stride = 3 * g.dim;
    g.k_offset = g.dim;
    g.v_offset = 2 * g.dim;
  } else {
    g.dim = q.dims.at(1);
    g.tk = inputs.at(1).dims.at(0);
    g.q_stride = g.kv_stride = g.dim;
  }
  g.head_dim = g.dim / std::max<int64_t>(layer.heads, 1);
  return g;
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (in.shapes.size() == 2)
    return failure("attention takes one input (the packed [T, 3D] q | k | v) or three (q, k and v)");
  for (size_t k = 0; k < in.shapes.size(); ++k)
    if (in.shapes[k].dims.size() != 2)
      return failure(fmt::format("attention needs [T, D] inputs but its input {} is {}", describe_input(in, k),
                                 in.shapes[k].to_string()));
  if (auto why = check_range("heads", layer.heads, 1); !why.empty()) return failure(why);
  const Shape& q = in.shapes[0];
  if (in.shapes.size() == 1 && q.dims[1] % 3 != 0)
    return failure(fmt::format("a packed attention input is [T, 3D] (q, k and v side by side), but {} is {}",
                               describe_input(in, 0), q.to_string()));
  if (in.shapes.size() == 3) {
    const Shape& k = in.shapes[1];
    const Shape& v = in.shapes[2];
    if (k.dims[1] != q.dims[1] || v != k)
      return failure(fmt::format("attention needs q [Tq, D], k and v [Tk, D], but they are {}, {} and {}",
                                 q.to_string(), k.to_string(), v.to_string()));
  }
  const Geometry g = geometry_of(layer, in.shapes);
  if (g.dim % layer.heads != 0)
    return failure(fmt::format("its {} features are not divisible by heads = {}", g.dim, layer.heads));
  if (!fits_elements({layer.heads, g.tq, g.tk}))
    return failure(fmt::format("its attention matrix is too large (at most {} elements per sample)", kMaxElements));
  return {Shape{{g.tq, g.dim}}, {}};
}

SavedBytes saved(const Layer& layer, const std::vector<Shape>& inputs, const Shape&) {
  const Geometry g = geometry_of(layer, inputs);
  return {layer.heads * g.tq * g.tk * static_cast<int64_t>(kFloatBytes), 0};  // softmax(Q K^T * scale)
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true, .saved = true}; }

std::string signature(const Layer& layer) {
  return fmt::format(" heads={}", layer.heads);  // shapes say whether it is packed
}

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const Geometry g = geometry_of(task.layer, task.inputs);
  const double pairs = static_cast<double>(b) * task.layer.heads * g.tq * g.tk;  // attention matrix entries
  const double gemm_flops = 2.0 * pairs * g.head_dim;
  const double qkv = static_cast<double>(b) * (g.tq + 2 * g.tk) * g.dim * task.element_bytes;
  const double y = static_cast<double>(b) * g.tq * g.dim * task.element_bytes;
  const double matrix = pairs * task.element_bytes;
  if (task.kind == TaskKind::FP)  // Q K^T, softmax, P V
    return {{gemm_flops, qkv + matrix, pairs, WorkClass::gemm, 1},
            streaming(2 * matrix, 1, 5 * pairs),
            {gemm_flops, matrix + qkv / 3 + y, b * g.tq * static_cast<double>(g.dim), WorkClass::gemm, 1}};
  // dP = dY V^T, the softmax's backward, dQ, dK, dV.
  return {{gemm_flops, y + qkv / 3 + matrix, pairs, WorkClass::gemm, 1},
          streaming(3 * matrix, 1, 3 * pairs),
          {3 * gemm_flops, 3 * matrix + 2 * qkv + y, b * (g.tq + 2 * g.tk) * static_cast<double>(g.dim),
           WorkClass::gemm, 3}};
}

// BP1's scratch: the gradient of the attention matrix of every head (the
// CUDA backend runs the heads as one batched GEMM).
int64_t scratch_bytes(const OpTask& task, int64_t b) {
  if (task.kind != TaskKind::BP1) return 0;
  const Geometry g = geometry_of(task.layer, task.inputs);
  return b * task.layer.heads * g.tq * g.tk * static_cast<int64_t>(kFloatBytes);
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Geometry g = geometry_of(task.layer, task.inputs);
  const float scale = task.layer.scale > 0 ? static_cast<float>(task.layer.scale)
                                           : static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.head_dim)));
  // Operand k of q, k, v: the packed input at its column offset, or input k.
  auto operand = [&](TensorRole role, int k) {
    if (g.packed) return out.tensor(role, 0, k == 0 ? 0 : k == 1 ? g.k_offset : g.v_offset);
    return out.tensor(role, k);
  };
  const std::vector<rt::Arg> sizes{integer(ctx.samples), integer(task.layer.heads), integer(g.tq), integer(g.tk),
                                   integer(g.head_dim), integer(g.q_stride), integer(g.kv_stride), real(scale)};
  if (task.kind == TaskKind::FP) {
    std::vector<rt::Arg> args{operand(TensorRole::input, 0), operand(TensorRole::input, 1),
                              operand(TensorRole::input, 2), out.tensor(TensorRole::saved),
                              out.tensor(TensorRole::output)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    out.call(rt::Kernel::attention_forward, std::move(args));
    return;
  }
  if (task.kind != TaskKind::BP1) return;
  // Which of dq, dk, dv this task writes, and whether each adds.
  rt::Arg gradients[3] = {null_pointer(), null_pointer(), null_pointer()};
  bool adds[3] = {false, false, false};
  if (g.packed) {
    if (!writes_gradient(ctx, 0)) return;
    for (int k = 0; k < 3; ++k) {
      gradients[k] = operand(TensorRole::input_gradient, k);
      adds[k] = accumulates(ctx, 0);
    }
  } else {
    bool any = false;
    for_each_input_gradient(task, ctx, [&](int k, bool accumulate) {
      gradients[k] = out.tensor(TensorRole::input_gradient, k);
      adds[k] = accumulate;
      any = true;
    });
    if (!any) return;
  }
  std::vector<rt::Arg> args{operand(TensorRole::input, 0), operand(TensorRole::input, 1),
                            operand(TensorRole::input, 2), out.tensor(TensorRole::saved),
                            out.tensor(TensorRole::gradient), gradients[0], gradients[1], gradients[2],
                            out.tensor(TensorRole::workspace)};
  args.insert(args.end(), sizes.begin(), sizes.end());
  for (bool add : adds) args.push_back(flag(add));
  out.call(rt::Kernel::attention_backward, std::move(args));
}

}  // namespace

extern const OpSpec attention_spec = {
    .op = Op::attention,
    .name = "attention",
    .fields = {"heads", "scale"},
    .read_fields = read_fields,
    .min_inputs = 1,
    .max_inputs = 3,
    .infer_shape = infer_shape,
    .saved = saved,
    .bp1_needs = bp1_needs,
    .signature = signature,
    .work = work,
    .scratch_bytes = scratch_bytes,
    .invoke = invoke,
    .autocast = Autocast::low_precision,
};

}  // namespace mplan::ops
