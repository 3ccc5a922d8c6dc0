// softmax_xent: the loss, softmax cross-entropy over the model's classes. FP
// writes the probabilities (Y) and the round's summed loss; BP1 is
// (P - target) / B, target the one-hot label (smoothed with `label_smoothing`,
// as PyTorch's CrossEntropyLoss), so the loss is averaged over the full batch
// across sub-batches (moDNN §III; docs/generated-program.md, "Semantics").

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.label_smoothing = r.optional_double("label_smoothing", 0.0);
  if (!(layer.label_smoothing >= 0 && layer.label_smoothing < 1))
    r.fail(r.get("label_smoothing"), fmt::format("label_smoothing must be in [0, 1), got {}", layer.label_smoothing));
}

ShapeOrMessage infer_shape(const Layer&, const ShapeInputs& in) {
  const Shape& first = in.shapes[0];
  if (first != Shape{{in.classes}})
    return failure(fmt::format("the loss needs an input of shape [{}] (the model's classes) but its input {} is {}",
                               in.classes, describe_input(in, 0), first.to_string()));
  return {first, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {.output = true}; }  // the probabilities (and the labels)

// FP: softmax and the loss (two kernels); BP1: (P - onehot) / B.
std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double bytes = 2 * elements(task.output, b) * task.element_bytes + 4.0 * b;
  if (task.kind == TaskKind::FP) return {streaming(bytes, 2, 10 * elements(task.output, b))};
  return {streaming(bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const int64_t classes = task.output.elements();
  if (task.kind == TaskKind::FP && ctx.evaluation) {
    out.call(rt::Kernel::softmax_xent_evaluate,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::labels), out.tensor(TensorRole::output),
              out.tensor(TensorRole::loss), integer(ctx.samples), integer(classes), real(task.layer.label_smoothing)});
  } else if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::softmax_xent_forward,
             {out.tensor(TensorRole::input), out.tensor(TensorRole::labels), out.tensor(TensorRole::output),
              out.tensor(TensorRole::loss), integer(ctx.samples), integer(classes), real(task.layer.label_smoothing)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::softmax_xent_backward,
             {out.tensor(TensorRole::output), out.tensor(TensorRole::labels), out.tensor(TensorRole::input_gradient, 0),
              integer(ctx.samples), integer(classes), real(1.0f / static_cast<float>(ctx.batch)),
              flag(accumulates(ctx, 0)), real(task.layer.label_smoothing)});
  }
}

}  // namespace

extern const OpSpec softmax_xent_spec = {
    .op = Op::softmax_xent,
    .name = "softmax_xent",
    .fields = {"label_smoothing"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .is_loss = true,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::float32,
};

}  // namespace mplan::ops
