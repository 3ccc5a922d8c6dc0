// One function per op kind giving the runtime calls of a task (DESIGN.md, TDFG:
// what each backward task reads is exact, so the pointers here are exactly the
// blocks of Task::reads and Task::writes).

#include "codegen/emit_ops.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/runtime_conv_shape.h"
#include "runtime/conv.h"

namespace mplan::codegen {
namespace {

using Lines = std::vector<std::string>;

// Pointers into the arena of the block's region, by element type.
struct Emitter {
  const ComputeCall& call;
  const Model& model;
  const Tdfg& tdfg;
  const Task& task;
  const Layer* layer;

  const std::string& region(BlockId b) const {
    auto it = call.region_of.find(b);
    MPLAN_CHECK(it != call.region_of.end(),
                "codegen: task " + task.name + " uses block " + std::to_string(b) + " without a buffer");
    return it->second;
  }
  std::string f32(BlockId b) const { return "F(c, " + region(b) + ")"; }
  std::string i32(BlockId b) const { return "I32(c, " + region(b) + ")"; }
  std::string u8(BlockId b) const { return "U8(c, " + region(b) + ")"; }
  std::string workspace() const {
    return call.workspace_region.empty() ? "nullptr" : "D(c, " + call.workspace_region + ")";
  }
  std::string workspace_bytes() const {
    return call.workspace_region.empty() ? "0" : call.workspace_region + ".bytes";
  }

  BlockId produced(LayerId in) const { return in == kModelInput ? tdfg.input_block : tdfg.output_of[in]; }
  BlockId input(int k = 0) const { return produced(layer->inputs.at(k)); }
  const Shape& input_shape(int k = 0) const { return model.input_shape(task.layer, k); }
  int64_t n() const { return call.samples; }
  BlockId output() const { return tdfg.output_of[task.layer]; }
  BlockId gradient() const { return tdfg.gradient_of[task.layer]; }  // dY of this layer
  BlockId weight() const { return tdfg.weight_of[task.layer]; }
  BlockId weight_grad() const { return tdfg.weight_grad_of[task.layer]; }
  BlockId saved() const { return tdfg.saved_of[task.layer]; }
  bool writes(BlockId b) const {
    return b != kNoBlock && std::find(task.writes.begin(), task.writes.end(), b) != task.writes.end();
  }
  bool reads(BlockId b) const {
    return b != kNoBlock && std::find(task.reads.begin(), task.reads.end(), b) != task.reads.end();
  }
  // The gradient block of input k when this BP1 task writes it, else kNoBlock.
  BlockId input_gradient(int k) const {
    LayerId in = layer->inputs.at(k);
    if (in == kModelInput) return kNoBlock;
    BlockId g = tdfg.gradient_of[in];
    return writes(g) ? g : kNoBlock;
  }
  // The first writer of a gradient writes it; later consumers (listed as
  // readers of it too, tdfg.h) add to it.
  std::string accumulate_input_gradient(BlockId g) const { return reads(g) ? "true" : "false"; }
  // dW accumulates over the sub-batches of an iteration (moDNN §III).
  std::string accumulate_weight_grad() const { return call.round > 0 ? "true" : "false"; }
  std::string dy() const { return f32(gradient()); }
  int64_t sample_elements(const Shape& s) const { return s.elements(); }
};

std::string b(bool v) { return v ? "true" : "false"; }

// A float literal that is valid C++ for every value: "2" -> "2.0f", "1e-05" -> "1e-05f".
std::string fl(double v) {
  std::string text = fmt::format("{:.9g}", v);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + "f";
}

// Channels and spatial size of a per-sample shape: [C, H, W] -> (C, H*W); [N] -> (N, 1).
std::pair<int64_t, int64_t> channels_and_hw(const Shape& s) {
  int64_t hw = 1;
  for (size_t i = 1; i < s.dims.size(); ++i) hw *= s.dims[i];
  return {s.dims.at(0), hw};
}

rt::ConvShape conv_shape_of(const Model& model, LayerId l, int64_t samples) {
  const Layer& layer = model.layers[l];
  return runtime_conv_shape(model.input_shape(l, 0), layer.out, layer.window, layer.groups, samples);
}

std::string conv_shape_text(const rt::ConvShape& s) {
  return fmt::format(
      "constexpr ConvShape shape{{.n = {}, .c = {}, .h = {}, .w = {}, .k = {}, .r = {}, .s = {}, "
      ".stride_h = {}, .stride_w = {}, .pad_h = {}, .pad_w = {}, .groups = {}}};",
      s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups);
}

rt::ConvDirection direction_of(TaskKind kind) {
  switch (kind) {
    case TaskKind::FP: return rt::ConvDirection::forward;
    case TaskKind::BP1: return rt::ConvDirection::backward_data;
    default: return rt::ConvDirection::backward_filter;
  }
}

std::string algo_enum(const std::string& name) { return "ConvAlgo::" + name; }

// The CPU algorithm for a planned name: the CPU's own names pass through; a
// cuDNN name maps to the CPU algorithm of the same family (FFT has none).
std::string cpu_family(const std::string& planned) {
  rt::ConvAlgo algo;
  if (rt::conv_algo_from_name(planned, &algo)) return planned;
  std::string lower = planned;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower.find("winograd") != std::string::npos) return "winograd";
  if (lower.find("implicit") != std::string::npos) return "direct";
  if (lower.find("gemm") != std::string::npos || lower.find("algo_1") != std::string::npos) return "gemm";
  return "direct";
}

Lines conv_lines(const Emitter& e) {
  const rt::ConvShape shape = conv_shape_of(e.model, e.task.layer, e.n());
  const rt::ConvDirection direction = direction_of(e.task.kind);
  Lines lines{conv_shape_text(shape)};
  const std::string weight_elements = std::to_string(shape.w_elements());
  const bool micro = e.call.choice && e.call.choice->micro_batches.size() > 1;
  std::string data_args;
  std::string accumulate;
  switch (e.task.kind) {
    case TaskKind::FP: {
      const std::string bias = e.layer->bias ? e.f32(e.weight()) + " + " + weight_elements : "nullptr";
      data_args = fmt::format("{}, {}, {}, {}", e.f32(e.input()), e.f32(e.weight()), bias, e.f32(e.output()));
      break;
    }
    case TaskKind::BP1: {
      BlockId dx = e.input_gradient(0);
      data_args = fmt::format("{}, {}, {}", e.f32(e.weight()), e.dy(), e.f32(dx));
      accumulate = e.accumulate_input_gradient(dx);
      break;
    }
    default:
      data_args = fmt::format("{}, {}, {}", e.f32(e.input()), e.dy(), e.f32(e.weight_grad()));
      accumulate = e.accumulate_weight_grad();
      break;
  }
  const char* function = direction == rt::ConvDirection::forward         ? "conv_forward"
                         : direction == rt::ConvDirection::backward_data ? "conv_backward_data"
                                                                         : "conv_backward_filter";
  const std::string tail = accumulate.empty() ? "" : ", " + accumulate;
  if (micro) {
    // mu-cuDNN §III-A: the configuration is a list of micro-batches, each with its algorithm.
    std::string list;
    for (const MicroBatch& m : e.call.choice->micro_batches) {
      std::string algo = cpu_conv_algorithm(m.algorithm, e.task.kind, e.model, e.task.layer, m.size,
                                            e.call.workspace_bytes);
      list += fmt::format("{}{{{}, {}}}", list.empty() ? "" : ", ", m.size, algo_enum(algo));
    }
    lines.push_back("constexpr ConvMicroBatch micro[] = {" + list + "};");
    lines.push_back(fmt::format("{}_micro(shape, micro, {}, {}, {}, {}{});", function,
                                e.call.choice->micro_batches.size(), data_args, e.workspace(),
                                e.workspace_bytes(), tail));
  } else {
    std::string planned = e.call.choice ? e.call.choice->algorithm : "direct";
    std::string algo = cpu_conv_algorithm(planned, e.task.kind, e.model, e.task.layer, e.n(),
                                          e.call.workspace_bytes);
    lines.push_back(fmt::format("{}({}, shape, {}, {}, {}{});", function, algo_enum(algo), data_args,
                                e.workspace(), e.workspace_bytes(), tail));
  }
  if (e.task.kind == TaskKind::BP2 && e.layer->bias)
    lines.push_back(fmt::format("conv_backward_bias(shape, {}, {} + {}, {});", e.dy(), e.f32(e.weight_grad()),
                                weight_elements, e.accumulate_weight_grad()));
  return lines;
}

Lines linear_lines(const Emitter& e) {
  const int64_t in = e.input_shape().elements(), out = e.layer->out;
  const std::string bias_at = std::to_string(in * out);
  switch (e.task.kind) {
    case TaskKind::FP:
      return {fmt::format("linear_forward({}, {}, {}, {}, {}, {}, {});", e.f32(e.input()), e.f32(e.weight()),
                          e.layer->bias ? e.f32(e.weight()) + " + " + bias_at : "nullptr", e.f32(e.output()),
                          e.n(), in, out)};
    case TaskKind::BP1: {
      BlockId dx = e.input_gradient(0);
      return {fmt::format("linear_backward_data({}, {}, {}, {}, {}, {}, {});", e.f32(e.weight()), e.dy(),
                          e.f32(dx), e.n(), in, out, e.accumulate_input_gradient(dx))};
    }
    default: {
      Lines lines{fmt::format("linear_backward_weights({}, {}, {}, {}, {}, {}, {});", e.f32(e.input()), e.dy(),
                              e.f32(e.weight_grad()), e.n(), in, out, e.accumulate_weight_grad())};
      if (e.layer->bias)
        lines.push_back(fmt::format("linear_backward_bias({}, {} + {}, {}, {}, {});", e.dy(),
                                    e.f32(e.weight_grad()), bias_at, e.n(), out, e.accumulate_weight_grad()));
      return lines;
    }
  }
}

std::string pool_shape_text(const Emitter& e) {
  const Shape& in = e.input_shape();
  const Window& w = e.layer->window;
  return fmt::format(
      "const PoolShape shape{{.n = {}, .c = {}, .h = {}, .w = {}, .kernel_h = {}, .kernel_w = {}, "
      ".stride_h = {}, .stride_w = {}, .pad_h = {}, .pad_w = {}, .ceil_mode = {}}};",
      e.n(), in.dims.at(0), in.dims.at(1), in.dims.at(2), w.kernel_h, w.kernel_w, w.stride_h, w.stride_w,
      w.pad_h, w.pad_w, b(e.layer->ceil_mode));
}

Lines pool_lines(const Emitter& e) {
  const bool max = e.layer->pool_mode == PoolMode::max;
  Lines lines{pool_shape_text(e)};
  if (e.task.kind == TaskKind::FP) {
    lines.push_back(fmt::format("{}_pool_forward(shape, {}, {});", max ? "max" : "avg", e.f32(e.input()),
                                e.f32(e.output())));
  } else {
    BlockId dx = e.input_gradient(0);
    if (max)
      lines.push_back(fmt::format("max_pool_backward(shape, {}, {}, {}, {}, {});", e.f32(e.input()),
                                  e.f32(e.output()), e.dy(), e.f32(dx), e.accumulate_input_gradient(dx)));
    else
      lines.push_back(fmt::format("avg_pool_backward(shape, {}, {}, {});", e.dy(), e.f32(dx),
                                  e.accumulate_input_gradient(dx)));
  }
  return lines;
}

Lines elementwise_lines(const Emitter& e, const char* name) {
  const int64_t count = e.n() * e.input_shape().elements();
  if (e.task.kind == TaskKind::FP)
    return {fmt::format("{}_forward({}, {}, {});", name, e.f32(e.input()), e.f32(e.output()), count)};
  BlockId dx = e.input_gradient(0);
  if (e.layer->op == Op::relu)
    return {fmt::format("relu_backward({}, {}, {}, {}, {});", e.f32(e.output()), e.dy(), e.f32(dx), count,
                        e.accumulate_input_gradient(dx))};
  return {fmt::format("{}_backward({}, {}, {}, {});", name, e.dy(), e.f32(dx), count,
                      e.accumulate_input_gradient(dx))};
}

Lines global_avgpool_lines(const Emitter& e) {
  auto [channels, hw] = channels_and_hw(e.input_shape());
  if (e.task.kind == TaskKind::FP)
    return {fmt::format("global_avg_pool_forward({}, {}, {}, {}, {});", e.f32(e.input()), e.f32(e.output()),
                        e.n(), channels, hw)};
  BlockId dx = e.input_gradient(0);
  return {fmt::format("global_avg_pool_backward({}, {}, {}, {}, {}, {});", e.dy(), e.f32(dx), e.n(), channels,
                      hw, e.accumulate_input_gradient(dx))};
}

// Batch-norm blocks: W = [gamma (C) | beta (C)], saved = [mean (C) | invstd (C)],
// state = [momentum buffer (2C, when SGD has momentum) | running mean (C) | running var (C)].
Lines batchnorm_lines(const Emitter& e) {
  auto [channels, hw] = channels_and_hw(e.input_shape());
  const std::string C = std::to_string(channels);
  const int64_t momentum_elements = e.model.optimizer.momentum > 0 ? e.model.parameter_count(e.task.layer) : 0;
  const std::string saved = e.f32(e.saved());
  switch (e.task.kind) {
    case TaskKind::FP: {
      const std::string state = e.f32(e.tdfg.state_of[e.task.layer]);
      return {fmt::format("batchnorm_forward_train({}, {}, {} + {}, {}, {}, {} + {}, {} + {}, {} + {}, {}, {}, {}, "
                          "{}, {});",
                          e.f32(e.input()), e.f32(e.weight()), e.f32(e.weight()), C, e.f32(e.output()), saved, saved,
                          C, state, momentum_elements, state, momentum_elements + channels, e.n(), channels, hw,
                          fl(e.layer->eps), fl(e.layer->momentum))};
    }
    case TaskKind::BP1: {
      // dx only: dgamma and dbeta are BP2's (the runtime recomputes the channel sums, no scratch).
      BlockId dx = e.input_gradient(0);
      return {fmt::format("batchnorm_backward_data({}, {}, {}, {} + {}, {}, {}, {}, {}, {}, {});", e.f32(e.input()),
                          e.f32(e.weight()), saved, saved, C, e.dy(), e.f32(dx), e.n(), channels, hw,
                          e.accumulate_input_gradient(dx))};
    }
    default:
      return {fmt::format("batchnorm_backward_params({}, {}, {} + {}, {}, {}, {} + {}, {}, {}, {}, {});",
                          e.f32(e.input()), saved, saved, C, e.dy(), e.f32(e.weight_grad()), e.f32(e.weight_grad()),
                          C, e.n(), channels, hw, e.accumulate_weight_grad())};
  }
}

Lines lrn_lines(const Emitter& e) {
  auto [channels, hw] = channels_and_hw(e.input_shape());
  const Layer& l = *e.layer;
  const std::string params = fmt::format("{}, {}, {}, {}", l.lrn_size, fl(l.alpha), fl(l.beta), fl(l.k));
  if (e.task.kind == TaskKind::FP)
    return {fmt::format("lrn_forward({}, {}, {}, {}, {}, {});", e.f32(e.input()), e.f32(e.output()), e.n(),
                        channels, hw, params)};
  BlockId dx = e.input_gradient(0);
  return {fmt::format("lrn_backward({}, {}, {}, {}, {}, {}, {}, {});", e.f32(e.input()), e.dy(), e.f32(dx), e.n(),
                      channels, hw, params, e.accumulate_input_gradient(dx))};
}

// The mask depends on (seed, step, global sample index), not on the sub-batch (DESIGN.md).
Lines dropout_lines(const Emitter& e) {
  const int64_t elements = e.input_shape().elements();
  if (e.task.kind == TaskKind::FP)
    return {fmt::format("dropout_forward({}, {}, {}, {}, {}, /*first_sample=*/{}, {}, c.seed, step);",
                        e.f32(e.input()), e.f32(e.output()), e.u8(e.saved()), e.n(), elements, e.call.first_sample,
                        fl(e.layer->p))};
  BlockId dx = e.input_gradient(0);
  return {fmt::format("dropout_backward({}, {}, {}, {}, {}, {});", e.u8(e.saved()), e.dy(), e.f32(dx),
                      e.n() * elements, fl(e.layer->p), e.accumulate_input_gradient(dx))};
}

// Backward of a join: one call per input occurrence; an input listed twice
// gets both contributions (the first honours the TDFG's accumulate rule).
template <typename CallText>
Lines per_input_backward(const Emitter& e, CallText call_text) {
  Lines lines;
  std::vector<BlockId> done;
  for (int k = 0; k < static_cast<int>(e.layer->inputs.size()); ++k) {
    BlockId dx = e.input_gradient(k);
    if (dx == kNoBlock) continue;
    bool seen = std::find(done.begin(), done.end(), dx) != done.end();
    lines.push_back(call_text(k, dx, seen ? std::string("true") : e.accumulate_input_gradient(dx)));
    done.push_back(dx);
  }
  return lines;
}

Lines add_lines(const Emitter& e) {
  const int64_t count = e.n() * e.input_shape().elements();
  if (e.task.kind == TaskKind::FP) {
    std::string inputs;
    for (int k = 0; k < static_cast<int>(e.layer->inputs.size()); ++k)
      inputs += (k ? ", " : "") + e.f32(e.input(k));
    return {"const float* inputs[] = {" + inputs + "};",
            fmt::format("add_forward(inputs, {}, {}, {});", e.layer->inputs.size(), e.f32(e.output()), count)};
  }
  return per_input_backward(e, [&](int, BlockId dx, const std::string& acc) {
    return fmt::format("add_backward({}, {}, {}, {});", e.dy(), e.f32(dx), count, acc);
  });
}

Lines concat_lines(const Emitter& e) {
  const int64_t hw = channels_and_hw(e.layer->output).second;
  const int64_t total = e.layer->output.dims.at(0);
  if (e.task.kind == TaskKind::FP) {
    std::string inputs, channels;
    for (int k = 0; k < static_cast<int>(e.layer->inputs.size()); ++k) {
      inputs += (k ? ", " : "") + e.f32(e.input(k));
      channels += (k ? ", " : "") + std::to_string(e.input_shape(k).dims.at(0));
    }
    return {"const float* inputs[] = {" + inputs + "};", "constexpr int64_t channels[] = {" + channels + "};",
            fmt::format("concat_forward(inputs, channels, {}, {}, {}, {});", e.layer->inputs.size(),
                        e.f32(e.output()), e.n(), hw)};
  }
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (int k = 0; k < static_cast<int>(e.layer->inputs.size()); ++k) {
    offsets.push_back(at);
    at += e.input_shape(k).dims.at(0);
  }
  return per_input_backward(e, [&](int k, BlockId dx, const std::string& acc) {
    return fmt::format("concat_backward({}, {}, {}, {}, /*channel_offset=*/{}, {}, {}, {});", e.dy(), e.f32(dx),
                       e.n(), total, offsets[k], e.input_shape(k).dims.at(0), hw, acc);
  });
}

// The loss: summed over the round's samples here, averaged over the full batch
// by the backward scale 1/B (DESIGN.md, "loss averaged over the full batch").
Lines softmax_xent_lines(const Emitter& e) {
  const int64_t classes = e.input_shape().elements();
  if (e.task.kind == TaskKind::FP)
    return {fmt::format("softmax_xent_forward({}, {}, {}, {}, {}, {}, false);", e.f32(e.input()),
                        e.i32(e.tdfg.labels_block), e.f32(e.output()), e.f32(e.tdfg.loss_block), e.n(), classes),
            fmt::format("c.loss_sum += *{};", e.f32(e.tdfg.loss_block))};
  BlockId dx = e.input_gradient(0);
  return {fmt::format("softmax_xent_backward({}, {}, {}, {}, {}, 1.0f / kBatch, {});", e.f32(e.output()),
                      e.i32(e.tdfg.labels_block), e.f32(dx), e.n(), classes, e.accumulate_input_gradient(dx))};
}

// torch.optim.SGD over every weighted layer; the momentum buffer is the head of
// the layer's state block.
Lines update_lines(const Emitter& e) {
  Lines lines;
  for (LayerId l = 0; l < static_cast<LayerId>(e.model.layers.size()); ++l) {
    if (e.tdfg.weight_of[l] == kNoBlock) continue;
    const bool momentum = e.model.optimizer.momentum > 0;
    lines.push_back(fmt::format("sgd_step({}, {}, {}, {}, c.lr, kMomentum, kWeightDecay, first_update);",
                                e.f32(e.tdfg.weight_of[l]), e.f32(e.tdfg.weight_grad_of[l]),
                                momentum ? e.f32(e.tdfg.state_of[l]) : "nullptr", e.model.parameter_count(l)));
  }
  return lines;
}

}  // namespace

std::string cpu_conv_algorithm(const std::string& planned, TaskKind kind, const Model& model, LayerId layer,
                               int64_t samples, int64_t workspace_bytes) {
  const rt::ConvShape shape = conv_shape_of(model, layer, samples);
  const rt::ConvDirection direction = direction_of(kind);
  auto fits = [&](const std::string& name) {
    rt::ConvAlgo algo;
    if (!rt::conv_algo_from_name(name, &algo) || !rt::conv_algo_supported(algo, direction, shape)) return false;
    return static_cast<int64_t>(rt::conv_workspace_bytes(algo, direction, shape)) <= workspace_bytes;
  };
  std::string family = cpu_family(planned);
  if (fits(family)) return family;
  if (family == "winograd" && fits("gemm")) return "gemm";
  return "direct";
}

Result<std::vector<std::string>> emit_compute_call(const ComputeCall& call) {
  const Task& task = *call.task;
  if (task.kind == TaskKind::update) {
    Emitter e{call, *call.model, *call.tdfg, task, nullptr};
    return update_lines(e);
  }
  Emitter e{call, *call.model, *call.tdfg, task, &call.model->layers.at(task.layer)};
  switch (task.op) {
    case Op::conv: return conv_lines(e);
    case Op::linear: return linear_lines(e);
    case Op::relu: return elementwise_lines(e, "relu");
    case Op::flatten: return elementwise_lines(e, "flatten");
    case Op::pool: return pool_lines(e);
    case Op::global_avgpool: return global_avgpool_lines(e);
    case Op::batchnorm: return batchnorm_lines(e);
    case Op::lrn: return lrn_lines(e);
    case Op::dropout: return dropout_lines(e);
    case Op::add: return add_lines(e);
    case Op::concat: return concat_lines(e);
    case Op::softmax_xent: return softmax_xent_lines(e);
  }
  return Error{{}, "codegen: task " + task.name + " has an op the runtime does not implement"};
}

}  // namespace mplan::codegen
