// patch_embed: the vision transformer's patch embedding, a convolution whose
// kernel and stride are the patch size (no padding), its [out, H/p, W/p]
// output laid out as a sequence [T, out] of T = (H/p)*(W/p) patches in
// row-major order (ViT's conv_proj, reshape and permute). One GEMM over the
// unfolded patches (scratch: the patches, as large as the input) each way.
// Parameters as PyTorch's Conv2d: weight (out, C, p, p), bias (out).

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) {
  layer.out = r.required_int("out", 1);
  const int64_t patch = r.required_int("patch", 1);
  layer.window = Window{patch, patch, patch, patch, 0, 0};
  layer.bias = r.optional_bool("bias", true);
}

int64_t patch_of(const Layer& layer) { return layer.window.kernel_h; }

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  if (auto why = need_rank(layer, in, 3, "[C, H, W]"); !why.empty()) return failure(why);
  const int64_t patch = patch_of(layer);
  for (const std::string& why : {check_range("out", layer.out, 1), check_range("patch", patch, 1)})
    if (!why.empty()) return failure(why);
  const Shape& x = in.shapes[0];
  if (patch > x.dims[1] || patch > x.dims[2])
    return failure(fmt::format("patch {} is larger than its input's {}x{} image", patch, x.dims[1], x.dims[2]));
  if (!fits_elements({layer.out, x.dims[0], patch, patch}))
    return failure(fmt::format("its weights are too large (at most {} elements)", kMaxElements));
  return {Shape{{(x.dims[1] / patch) * (x.dims[2] / patch), layer.out}}, {}};
}

std::vector<LayerTensor> parameters(const Layer& layer, const std::vector<Shape>& inputs) {
  const int64_t c = inputs.at(0).dims.at(0), patch = patch_of(layer);
  const int64_t fan_in = c * patch * patch;
  std::vector<LayerTensor> tensors{{"weight", {layer.out, c, patch, patch}, TensorInit::uniform_fan_in, fan_in}};
  if (layer.bias) tensors.push_back({"bias", {layer.out}, TensorInit::uniform_fan_in, fan_in});
  return tensors;
}

BackwardNeeds bp1_needs(const Layer&) { return {.weight = true}; }
BackwardNeeds bp2_needs(const Layer&) { return {.inputs = true}; }

std::string signature(const Layer& layer) {
  return fmt::format(" patch={} bias={}", patch_of(layer), layer.bias ? 1 : 0);
}

struct Sizes {
  int64_t c, h, w, tokens, row;  // row: c * patch * patch
};
Sizes sizes_of(const OpTask& task) {
  const Shape& x = task.inputs.at(0);
  const int64_t patch = patch_of(task.layer);
  return {x.dims.at(0), x.dims.at(1), x.dims.at(2), task.output.dims.at(0), x.dims.at(0) * patch * patch};
}

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const Sizes s = sizes_of(task);
  const double rows = static_cast<double>(b) * s.tokens, out = static_cast<double>(task.layer.out);
  const double e = task.element_bytes;
  const double patches = rows * s.row * e, y = rows * out * e, w = out * s.row * e;
  const double flops = 2.0 * rows * s.row * out;
  const WorkEstimate unfold = streaming(2 * patches);  // gather (or scatter) the patches
  if (task.kind == TaskKind::FP) return {unfold, {flops, patches + w + y, rows * out, WorkClass::gemm, 1}};
  if (task.kind == TaskKind::BP1) return {{flops, y + w + patches, rows * s.row, WorkClass::gemm, 1}, unfold};
  return {unfold, {flops, patches + y + 2 * w, out * s.row, WorkClass::gemm, 1}};
}

int64_t scratch_bytes(const OpTask& task, int64_t b) {
  const Sizes s = sizes_of(task);
  return b * s.tokens * s.row * static_cast<int64_t>(kFloatBytes);
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Sizes s = sizes_of(task);
  const int64_t weights = task.layer.out * s.row;
  const std::vector<rt::Arg> sizes{integer(ctx.samples), integer(s.c),       integer(s.h),
                                   integer(s.w),         integer(patch_of(task.layer)), integer(task.layer.out)};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  // Slots are made by use: a task's tensors are exactly those its kernels take.
  switch (task.kind) {
    case TaskKind::FP:
      out.call(rt::Kernel::patch_embed_forward,
               with_sizes({out.tensor(TensorRole::input), out.tensor(TensorRole::weight),
                           task.layer.bias ? out.tensor(TensorRole::weight, 0, weights) : null_pointer(),
                           out.tensor(TensorRole::output), out.tensor(TensorRole::workspace)}));
      return;
    case TaskKind::BP1: {
      if (!writes_gradient(ctx, 0)) return;
      std::vector<rt::Arg> args =
          with_sizes({out.tensor(TensorRole::weight), out.tensor(TensorRole::gradient),
                      out.tensor(TensorRole::input_gradient, 0), out.tensor(TensorRole::workspace)});
      args.push_back(flag(accumulates(ctx, 0)));
      out.call(rt::Kernel::patch_embed_backward_data, std::move(args));
      return;
    }
    case TaskKind::BP2:
      out.call(rt::Kernel::patch_embed_backward_params,
               with_sizes({out.tensor(TensorRole::input), out.tensor(TensorRole::gradient),
                           out.tensor(TensorRole::weight_grad),
                           task.layer.bias ? out.tensor(TensorRole::weight_grad, 0, weights) : null_pointer(),
                           out.tensor(TensorRole::workspace)}));
      return;
    case TaskKind::update: break;
  }
}

}  // namespace

extern const OpSpec patch_embed_spec = {
    .op = Op::patch_embed,
    .name = "patch_embed",
    .fields = {"out", "patch", "bias"},
    .read_fields = read_fields,
    .infer_shape = infer_shape,
    .parameters = parameters,
    .bp1_needs = bp1_needs,
    .bp2_needs = bp2_needs,
    .signature = signature,
    .work = work,
    .scratch_bytes = scratch_bytes,
    .invoke = invoke,
    .autocast = Autocast::low_precision,
};

}  // namespace mplan::ops
