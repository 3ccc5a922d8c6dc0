// clip: min(max(x, min), max), PyTorch's Hardtanh / clamp; ReLU6 (MobileNet
// v2) is the default range [0, 6]. Backward needs only Y: the gradient passes
// where min < Y < max, which is exactly where min < X < max.

#include <cmath>

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

std::string check_clip_range(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high) || !(low < high))
    return fmt::format("min must be below max (both finite), got min {} and max {}", low, high);
  return {};
}

void read_fields(const MapReader& r, Layer& layer) {
  layer.clip_min = r.optional_double("min", 0.0);
  layer.clip_max = r.optional_double("max", 6.0);
  if (std::string why = check_clip_range(layer.clip_min, layer.clip_max); !why.empty())
    r.fail(r.has("max") ? r.get("max") : r.get("min"), why);
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (std::string why = check_clip_range(layer.clip_min, layer.clip_max); !why.empty()) return failure(why);
  return {in.shapes[0], {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {.output = true}; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) { return activation_work(task, b, 2); }

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, rt::Kernel::clip_forward, rt::Kernel::clip_backward, /*from_output=*/true,
                    {real(static_cast<float>(task.layer.clip_min)), real(static_cast<float>(task.layer.clip_max))});
}

}  // namespace

extern const OpSpec clip_spec = {
    .op = Op::clip,
    .name = "clip",
    .fields = {"min", "max"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .paper_class = PaperClass::cheap,  // an activation (SuperNeurons §3.4: ACT)
    .work = work,
    .invoke = invoke,
};

}  // namespace mplan::ops
