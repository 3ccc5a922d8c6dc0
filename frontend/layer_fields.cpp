#include "frontend/layer_fields.h"

#include <fmt/format.h>

#include <array>

namespace mplan {
namespace {

constexpr std::array kAllOps = {Op::conv,    Op::linear,  Op::relu,   Op::pool,
                                Op::global_avgpool, Op::batchnorm, Op::lrn, Op::dropout,
                                Op::add,     Op::concat,  Op::flatten, Op::softmax_xent};

void read_conv(const MapReader& r, Layer& layer) {
  r.check_keys({"name", "op", "in", "out", "kernel", "stride", "pad", "groups", "bias"},
               "conv layer");
  layer.out = r.required_int("out", 1);
  auto [kernel_h, kernel_w] = r.required_pair("kernel", 1);
  auto [stride_h, stride_w] = r.optional_pair("stride", {1, 1}, 1);
  auto [pad_h, pad_w] = r.optional_pair("pad", {0, 0}, 0);
  layer.window = Window{kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w};
  layer.groups = r.optional_int("groups", 1, 1);
  layer.bias = r.optional_bool("bias", true);
}

void read_pool(const MapReader& r, Layer& layer) {
  r.check_keys({"name", "op", "in", "mode", "kernel", "stride", "pad", "ceil_mode"}, "pool layer");
  std::string mode = r.required_string("mode");
  if (mode == "max") {
    layer.pool_mode = PoolMode::max;
  } else if (mode == "avg") {
    layer.pool_mode = PoolMode::avg;
  } else {
    r.fail(r.get("mode"), fmt::format("mode must be max or avg, got '{}'", mode));
  }
  auto kernel = r.required_pair("kernel", 1);
  auto stride = r.optional_pair("stride", kernel, 1);  // PyTorch: stride defaults to kernel
  auto pad = r.optional_pair("pad", {0, 0}, 0);
  layer.window = Window{kernel.first, kernel.second, stride.first, stride.second, pad.first,
                        pad.second};
  layer.ceil_mode = r.optional_bool("ceil_mode", false);
}

double read_probability(const MapReader& r, std::string_view key, double fallback, bool one_ok) {
  double v = r.optional_double(key, fallback);
  if (v < 0 || v > 1 || (!one_ok && v == 1))
    r.fail(r.get(key), fmt::format("{} must be in [0, 1{}, got {}", key, one_ok ? "]" : ")", v));
  return v;
}

}  // namespace

std::optional<Op> op_from_name(std::string_view name) {
  for (Op op : kAllOps)
    if (name == op_name(op)) return op;
  return std::nullopt;
}

std::string all_op_names() {
  std::string names;
  for (Op op : kAllOps) names += (names.empty() ? "" : ", ") + std::string(op_name(op));
  return names;
}

Layer read_op_fields(const MapReader& r, Op op) {
  Layer layer;
  layer.op = op;
  switch (op) {
    case Op::conv:
      read_conv(r, layer);
      break;
    case Op::linear:
      r.check_keys({"name", "op", "in", "out", "bias"}, "linear layer");
      layer.out = r.required_int("out", 1);
      layer.bias = r.optional_bool("bias", true);
      break;
    case Op::pool:
      read_pool(r, layer);
      break;
    case Op::batchnorm:
      r.check_keys({"name", "op", "in", "eps", "momentum"}, "batchnorm layer");
      layer.eps = r.optional_double("eps", 1e-5);
      if (!(layer.eps > 0)) r.fail(r.get("eps"), fmt::format("eps must be positive, got {}", layer.eps));
      layer.momentum = read_probability(r, "momentum", 0.1, /*one_ok=*/true);
      break;
    case Op::lrn:
      r.check_keys({"name", "op", "in", "size", "alpha", "beta", "k"}, "lrn layer");
      layer.lrn_size = r.optional_int("size", 5, 1);
      layer.alpha = r.optional_double("alpha", 1e-4);
      layer.beta = r.optional_double("beta", 0.75);
      layer.k = r.optional_double("k", 2.0);
      break;
    case Op::dropout:
      r.check_keys({"name", "op", "in", "p"}, "dropout layer");
      layer.p = read_probability(r, "p", 0.5, /*one_ok=*/false);
      break;
    case Op::relu:
    case Op::global_avgpool:
    case Op::add:
    case Op::concat:
    case Op::flatten:
    case Op::softmax_xent:
      r.check_keys({"name", "op", "in"}, fmt::format("{} layer", op_name(op)));
      break;
  }
  return layer;
}

}  // namespace mplan
