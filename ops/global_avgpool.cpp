// global_avgpool: the mean over each channel's H x W; output [C, 1, 1].

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  return {Shape{{in.shapes[0].dims[0], 1, 1}}, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {}; }  // dX = dY / hw

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  return {streaming((elements(task.inputs.at(0), b) + elements(task.output, b)) * task.element_bytes)};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  auto [channels, hw] = channels_and_hw(task.inputs.at(0));
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::global_avg_pool_forward, {out.tensor(TensorRole::input), out.tensor(TensorRole::output),
                                                   integer(ctx.samples), integer(channels), integer(hw)});
  } else if (task.kind == TaskKind::BP1 && writes_gradient(ctx, 0)) {
    out.call(rt::Kernel::global_avg_pool_backward,
             {out.tensor(TensorRole::gradient), out.tensor(TensorRole::input_gradient, 0), integer(ctx.samples),
              integer(channels), integer(hw), flag(accumulates(ctx, 0))});
  }
}

}  // namespace

extern const OpSpec global_avgpool_spec = {
    .op = Op::global_avgpool,
    .name = "global_avgpool",
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
