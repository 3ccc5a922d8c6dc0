// dropout: zeroes each element with probability p and scales the rest by
// 1/(1-p). The mask is a counter-based hash of (seed, step, global sample,
// element) (runtime/dropout_hash.h), saved for BP as one byte per element; a
// recomputed FP draws exactly the same mask.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.p = r.optional_double("p", 0.5);
  if (layer.p < 0 || layer.p >= 1) r.fail(r.get("p"), fmt::format("p must be in [0, 1), got {}", layer.p));
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (!(layer.p >= 0 && layer.p < 1)) return failure(fmt::format("p must be in [0, 1), got {}", layer.p));
  return {in.shapes[0], {}};
}

SavedBytes saved(const Layer&, const std::vector<Shape>&, const Shape& output) {
  return {output.elements(), 0};  // the mask: one byte per element
}

BackwardNeeds bp1_needs(const Layer&) { return {.saved = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double y = elements(task.output, b) * task.element_bytes, mask = elements(task.output, b);
  if (task.kind == TaskKind::FP) return {streaming(2 * y + mask)};
  return {streaming(2 * y + mask)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t per_sample = task.output.elements();
  const rt::Arg p = real(static_cast<float>(task.layer.p));
  if (task.kind == TaskKind::FP && ctx.evaluation) {
    // PyTorch's eval(): the identity, no mask.
    out.call(rt::Kernel::copy_or_add, {out.tensor(TensorRole::input), out.tensor(TensorRole::output),
                                       integer(ctx.samples * per_sample), flag(false)});
  } else if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::dropout_forward,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::output), out.tensor(TensorRole::saved),
              integer(ctx.samples), integer(per_sample), rt::Arg::of(rt::Variable::first_sample), p,
              rt::Arg::of(rt::Variable::seed), rt::Arg::of(rt::Variable::step)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::dropout_backward,
             {out.tensor(TensorRole::saved), out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0),
              integer(ctx.samples * per_sample), p, flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec dropout_spec = {
    .op = Op::dropout,
    .name = "dropout",
    .fields = {"p"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .saved = saved,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
