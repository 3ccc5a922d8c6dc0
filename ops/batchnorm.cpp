// batchnorm: batch normalisation in training mode, PyTorch's BatchNorm2d (or
// BatchNorm1d on [N]); statistics over the samples of each call, i.e. per
// sub-batch (the plan says when a batch is split). FP saves the batch mean and
// 1/std for BP and updates the running statistics (state); a recomputed FP
// normalises with the saved statistics and leaves the running ones alone, so
// it reproduces Y exactly.
//
// Blocks: W = [gamma (C) | beta (C)], saved = [mean (C) | invstd (C)], state =
// [SGD momentum (2C, with momentum) | running mean (C) | running var (C)].

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

double read_probability(const MapReader& r, std::string_view key, double fallback) {
  const double v = r.optional_double(key, fallback);
  if (v < 0 || v > 1) r.fail(r.get(key), fmt::format("{} must be in [0, 1], got {}", key, v));
  return v;
}

void read_fields(const MapReader& r, Layer& layer) {
  layer.eps = r.optional_double("eps", 1e-5);
  if (!(layer.eps > 0)) r.fail(r.get("eps"), fmt::format("eps must be positive, got {}", layer.eps));
  layer.momentum = read_probability(r, "momentum", 0.1);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  const Shape& first = in.shapes[0];
  if (first.dims.size() != 3 && first.dims.size() != 1)
    return failure(fmt::format("batchnorm needs a [C, H, W] or [N] input but its input {} is {}",
                               describe_input(in, 0), first.to_string()));
  if (!(layer.eps > 0)) return failure(fmt::format("eps must be positive, got {}", layer.eps));
  if (!(layer.momentum >= 0 && layer.momentum <= 1))
    return failure(fmt::format("momentum must be in [0, 1], got {}", layer.momentum));
  return {first, {}};
}

int64_t channels(const std::vector<Shape>& inputs) { return inputs.at(0).dims.at(0); }

std::vector<LayerTensor> parameters(const Layer&, const std::vector<Shape>& inputs) {
  const int64_t c = channels(inputs);
  return {{"weight", {c}, TensorInit::ones, 0}, {"bias", {c}, TensorInit::zeros, 0}};
}

std::vector<LayerTensor> buffers(const Layer&, const std::vector<Shape>& inputs) {
  const int64_t c = channels(inputs);
  return {{"running_mean", {c}, TensorInit::zeros, 0}, {"running_var", {c}, TensorInit::ones, 0}};
}

SavedBytes saved(const Layer&, const std::vector<Shape>& inputs, const Shape&) {
  return {0, 2 * channels(inputs) * static_cast<int64_t>(kFloatBytes)};  // mean and invstd per channel
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true, .weight = true, .saved = true}; }
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true, .saved = true}; }  // dgamma needs x_hat

// Statistics pass, then normalise (cuDNN's training forward); recomputed,
// the normalisation alone with the saved statistics.
std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const double x = elements(task.inputs.at(0), b) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {task.recompute ? streaming(2 * x) : streaming(3 * x, 2)};
  if (task.kind == TaskKind::BP2) return {streaming(2 * x)};  // dgamma, dbeta: reduce X and dY
  return {streaming(3 * x, 1)};                               // dX from X, dY and the reductions
}

// BP1 sums dy and dy*x_hat per channel on its way to dx.
int64_t scratch_bytes(const OpTask& task, int64_t) {
  return task.kind == TaskKind::BP1 ? 2 * channels(task.inputs) * static_cast<int64_t>(kFloatBytes) : 0;
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  // Plain variables, not a structured binding: the lambdas below capture c,
  // which clang before 16 refuses for a binding (the fuzz build uses clang).
  const std::pair<int64_t, int64_t> c_hw = channels_and_hw(task.inputs.at(0));
  const int64_t c = c_hw.first, hw = c_hw.second;
  const int64_t n = ctx.samples;
  // Slots are made by use: a task's tensors are exactly those its kernels take.
  auto gamma = [&] { return out.tensor(TensorRole::weight); };
  auto beta = [&] { return out.tensor(TensorRole::weight, 0, c); };
  auto mean = [&] { return out.tensor(TensorRole::saved); };
  auto invstd = [&] { return out.tensor(TensorRole::saved, 0, c); };
  switch (task.kind) {
    case TaskKind::FP: {
      const int64_t running = ctx.optimizer_state_per_parameter * 2 * c;  // after the optimizer's state
      if (ctx.evaluation) {
        out.call(rt::Kernel::batchnorm_forward_inference,
                 {out.tensor(TensorRole::input), gamma(), beta(), out.tensor(TensorRole::state, 0, running),
                  out.tensor(TensorRole::state, 0, running + c), out.tensor(TensorRole::output), integer(n),
                  integer(c), integer(hw), real(static_cast<float>(task.layer.eps))});
        return;
      }
      if (ctx.recompute) {
        out.call(rt::Kernel::batchnorm_forward_saved, {out.tensor(TensorRole::input), gamma(), beta(), mean(), invstd(),
                                                       out.tensor(TensorRole::output), integer(n), integer(c),
                                                       integer(hw)});
        return;
      }
      out.call(rt::Kernel::batchnorm_forward_train,
               {out.tensor(TensorRole::input), gamma(), beta(), out.tensor(TensorRole::output), mean(), invstd(),
                out.tensor(TensorRole::state, 0, running), out.tensor(TensorRole::state, 0, running + c), integer(n),
                integer(c), integer(hw), real(static_cast<float>(task.layer.eps)),
                real(static_cast<float>(task.layer.momentum))});
      return;
    }
    case TaskKind::BP1:
      if (!writes_gradient(ctx, 0)) return;
      out.call(rt::Kernel::batchnorm_backward_data,
               {out.tensor(TensorRole::input), gamma(), mean(), invstd(), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::input_gradient, 0), out.tensor(TensorRole::workspace), integer(n), integer(c),
                integer(hw), flag(accumulates(ctx, 0))});
      return;
    case TaskKind::BP2:
      out.call(rt::Kernel::batchnorm_backward_params,
               {out.tensor(TensorRole::input), mean(), invstd(), out.tensor(TensorRole::gradient),
                out.tensor(TensorRole::weight_grad), out.tensor(TensorRole::weight_grad, 0, c), integer(n), integer(c),
                integer(hw)});
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec batchnorm_spec = {
    .op = Op::batchnorm,
    .name = "batchnorm",
    .fields = {"eps", "momentum"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .parameters = parameters,
    .buffers = buffers,
    .saved = saved,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .forward_updates_state = true,
    .bp1_in_place = true,
    .recompute_from_saved = true,
    .batch_statistics = true,
    .paper_class = PaperClass::cheap,
    .work = work,
    .scratch_bytes = scratch_bytes,
    .invoke = invoke,
};

}  // namespace mplan::ops
