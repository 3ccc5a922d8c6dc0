// matmul: the matrix product of two inputs per sample, torch.matmul of
// batched operands: a [..., M, K] @ b [..., K, N] -> [..., M, N], the leading
// dimensions equal (batched); with `transpose_b: true`, b is [..., N, K] and
// used transposed (q @ k^T). cuBLAS / OpenBLAS SGEMMs; backward reads both inputs.

#include "ops/op_helpers.h"

namespace mplan::ops {
namespace {

void read_fields(const MapReader& r, Layer& layer) { layer.transpose_b = r.optional_bool("transpose_b", false); }

struct Dims {
  int64_t batch = 1, m = 1, k = 1, n = 1;  // batch: per sample
};
Dims dims_of(const Layer& layer, const Shape& a, const Shape& b) {
  Dims d;
  const size_t r = a.dims.size();
  for (size_t i = 0; i + 2 < r; ++i) d.batch *= a.dims[i];
  d.m = a.dims[r - 2];
  d.k = a.dims[r - 1];
  d.n = layer.transpose_b ? b.dims[r - 2] : b.dims[r - 1];
  return d;
}

ShapeOrMessage infer_shape(const Layer& layer, const ShapeInputs& in) {
  const Shape& a = in.shapes[0];
  const Shape& b = in.shapes[1];
  const size_t r = a.dims.size();
  if (r < 2 || b.dims.size() != r)
    return failure(fmt::format("matmul needs two inputs of the same rank, at least 2 ([..., M, K] and [..., K, N]), "
                               "but {} is {} and {} is {}",
                               describe_input(in, 0), a.to_string(), describe_input(in, 1), b.to_string()));
  for (size_t i = 0; i + 2 < r; ++i)
    if (a.dims[i] != b.dims[i])
      return failure(fmt::format("matmul's batch dimensions differ: {} is {} and {} is {}", describe_input(in, 0),
                                 a.to_string(), describe_input(in, 1), b.to_string()));
  const int64_t inner_b = layer.transpose_b ? b.dims[r - 1] : b.dims[r - 2];
  if (a.dims[r - 1] != inner_b)
    return failure(fmt::format("matmul's inner sizes differ: {} is {} and {} is {}{}", describe_input(in, 0),
                               a.to_string(), describe_input(in, 1), b.to_string(),
                               layer.transpose_b ? " (used transposed)" : ""));
  Shape out = a;
  out.dims[r - 1] = layer.transpose_b ? b.dims[r - 2] : b.dims[r - 1];
  return {out, {}};
}

BackwardNeeds bp1_needs(const Layer&) { return {.inputs = true}; }

std::string signature(const Layer& layer) { return layer.transpose_b ? " transpose_b=1" : ""; }

std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  const Dims d = dims_of(task.layer, task.inputs.at(0), task.inputs.at(1));
  const double batch = static_cast<double>(b) * d.batch;
  const double flops = 2.0 * batch * d.m * d.k * d.n;
  const double bytes = batch * (d.m * d.k + d.k * d.n + d.m * d.n) * task.element_bytes;
  if (task.kind == TaskKind::FP) return {{flops, bytes, batch * d.m * d.n, WorkClass::gemm, 1}};
  return {{flops, bytes, batch * d.m * d.k, WorkClass::gemm, 1}, {flops, bytes, batch * d.k * d.n, WorkClass::gemm, 1}};
}

void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  const Dims d = dims_of(task.layer, task.inputs.at(0), task.inputs.at(1));
  const std::vector<rt::Arg> sizes{integer(ctx.samples * d.batch), integer(d.m), integer(d.k), integer(d.n),
                                   flag(task.layer.transpose_b)};
  auto with_sizes = [&](std::vector<rt::Arg> args) {
    args.insert(args.end(), sizes.begin(), sizes.end());
    return args;
  };
  if (task.kind == TaskKind::FP) {
    out.call(rt::Kernel::matmul_forward, with_sizes({out.tensor(TensorRole::input, 0), out.tensor(TensorRole::input, 1),
                                                     out.tensor(TensorRole::output)}));
  } else if (task.kind == TaskKind::BP1) {
    for_each_input_gradient(task, ctx, [&](int k, bool accumulate) {
      std::vector<rt::Arg> args =
          with_sizes({out.tensor(TensorRole::input, 1 - k), out.tensor(TensorRole::gradient),
                      out.tensor(TensorRole::input_gradient, k)});
      args.push_back(flag(accumulate));
      out.call(k == 0 ? rt::Kernel::matmul_backward_a : rt::Kernel::matmul_backward_b, std::move(args));
    });
  }
}

}  // namespace

extern const OpSpec matmul_spec = {
    .op = Op::matmul,
    .name = "matmul",
    .fields = {"transpose_b"},
    .read_fields = read_fields,
    .min_inputs = 2,
    .max_inputs = 2,
    .infer_shape = infer_shape,
    .bp1_needs = bp1_needs,
    .signature = signature,
    .work = work,
    .invoke = invoke,
    .autocast = Autocast::low_precision,
};

}  // namespace mplan::ops
