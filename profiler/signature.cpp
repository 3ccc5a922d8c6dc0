#include "profiler/signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace mplan {

namespace {
// The parameters whose weight block also holds a 16-bit copy (tdfg.cpp make_blocks).
int64_t copied_parameters(const Tdfg& tdfg) {
  const Model& model = *tdfg.model;
  int64_t copied = 0;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const BlockId w = tdfg.weight_of.at(l);
    if (w == kNoBlock) continue;
    const int64_t params = model.parameter_count(l);
    if (tdfg.blocks[w].fixed_bytes > params * model.dtype_bytes()) copied += params;
  }
  return copied;
}

// The storage types of a task's input blocks, their gradients' and its
// output's gradient's, as f(kind, type): kind 0 input, 1 input gradient, 2
// the gradient at the output. The gradients' are the layers' (an evaluation
// graph has no gradient blocks, and its signatures are the training graph's);
// the model input's gradient, which no task writes, is float32.
template <typename F>
void for_each_block_type(const Tdfg& tdfg, const Layer& layer, LayerId l, F f) {
  for (LayerId in : layer.inputs) {
    f(0, tdfg.blocks.at(in == kModelInput ? tdfg.input_block : tdfg.output_of.at(in)).dtype);
    f(1, in == kModelInput ? DataType::float32 : tdfg.gradient_dtype.at(in));
  }
  f(2, tdfg.gradient_dtype.at(l));
}

// " name=a+b" where a type of `types` is not `dtype`; "" otherwise.
std::string types_field(const char* name, const std::vector<DataType>& types, DataType dtype) {
  if (std::all_of(types.begin(), types.end(), [&](DataType t) { return t == dtype; })) return "";
  std::string text = std::string(" ") + name + "=";
  for (size_t i = 0; i < types.size(); ++i) text += (i ? "+" : "") + std::string(data_type_name(types[i]));
  return text;
}
}  // namespace

TaskShape describe_task(const Tdfg& tdfg, TaskId t) {
  MPLAN_CHECK(tdfg.model != nullptr, "describe_task: the TDFG has no model");
  MPLAN_CHECK(t >= 0 && t < static_cast<TaskId>(tdfg.tasks.size()), "describe_task: task id out of range");
  const Model& model = *tdfg.model;
  const Task& task = tdfg.tasks[t];
  TaskShape shape;
  shape.kind = task.kind;
  if (task.kind == TaskKind::update) {
    for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
      const int64_t params = model.parameter_count(l);
      if (params == 0) continue;
      shape.parameters += params;
      shape.tensors += 1;
    }
    // SGD's momentum buffer, or AdamW's two moments, per parameter.
    shape.state_elements = model.optimizer.state_per_parameter() * shape.parameters;
    shape.copied_parameters = copied_parameters(tdfg);
    return shape;
  }
  const Layer& layer = model.layers.at(task.layer);
  shape.dtype = tdfg.blocks.at(tdfg.output_of.at(task.layer)).dtype;
  shape.copied_parameters = weights_cast_by_task(model, task.layer, task.kind, shape.dtype);
  if (is_16_bit(model.precision))
    for_each_block_type(tdfg, layer, task.layer, [&](int kind, DataType t) {
      if (kind == 0) shape.input_dtypes.push_back(t);
      else if (kind == 1) shape.input_gradient_dtypes.push_back(t);
      else shape.gradient_dtype = t;
    });
  shape.layer = layer;
  shape.layer.name.clear();
  // Positions, not ids (TaskShape::layer): clearing them left every job of a
  // multi-input op's BP1 (add, concat, mul, matmul, attention) without a
  // kernel, so measured profiles timed it at 0 ms (docs/gpu-validation.md).
  for (size_t k = 0; k < layer.inputs.size(); ++k)
    shape.layer.inputs[k] = static_cast<LayerId>(
        std::find(layer.inputs.begin(), layer.inputs.end(), layer.inputs[k]) - layer.inputs.begin());
  shape.layer.where = {};
  shape.op = layer.op;
  shape.inputs = model.input_shapes(task.layer);
  shape.output = layer.output;
  shape.out = layer.out;
  shape.groups = layer.groups;
  shape.bias = layer.bias;
  shape.window = layer.window;
  shape.pool_mode = layer.pool_mode;
  shape.lrn_size = layer.lrn_size;
  return shape;
}

Layer task_layer(const TaskShape& s) {
  Layer layer = s.layer;
  layer.op = s.op;
  layer.out = s.out;
  layer.groups = s.groups;
  layer.bias = s.bias;
  layer.window = s.window;
  layer.pool_mode = s.pool_mode;
  layer.lrn_size = s.lrn_size;
  return layer;
}

std::string layer_signature(const TaskShape& s) {
  if (s.kind == TaskKind::update)
    return fmt::format("update parameters={} state={} tensors={}", s.parameters, s.state_elements, s.tensors) +
           (s.copied_parameters > 0 ? fmt::format(" copies={}", s.copied_parameters) : "");
  std::string text = op_name(s.op);
  text += " in=";
  for (size_t i = 0; i < s.inputs.size(); ++i) text += (i ? "+" : "") + s.inputs[i].to_string();
  text += " out=" + s.output.to_string();
  // An input read twice (add(x, x)) has one gradient, written then added to.
  const std::vector<LayerId>& positions = s.layer.inputs;
  for (size_t k = 0; k < positions.size(); ++k)
    if (positions[k] != static_cast<LayerId>(k)) {
      text += " inputs=";
      for (size_t i = 0; i < positions.size(); ++i) text += (i ? "+" : "") + std::to_string(positions[i]);
      break;
    }
  // The fields that change the work: the op table's.
  if (const OpSpec& spec = op_spec(s.op); spec.signature != nullptr) text += spec.signature(task_layer(s));
  if (s.dtype != DataType::float32) text += std::string(" dtype=") + data_type_name(s.dtype);
  text += types_field("in_types", s.input_dtypes, s.dtype);
  text += types_field("in_grad_types", s.input_gradient_dtypes, s.dtype);
  if (!s.input_dtypes.empty() && s.gradient_dtype != s.dtype)
    text += std::string(" grad_type=") + data_type_name(s.gradient_dtype);
  // A 16-bit op that casts its weights where it uses them (FP, BP1).
  if (s.copied_parameters > 0) text += fmt::format(" copies={}", s.copied_parameters);
  return text;
}

std::string task_signature(const TaskShape& s) {
  return s.kind == TaskKind::update ? layer_signature(s) : layer_signature(s) + " " + task_kind_name(s.kind);
}

ConvDirection conv_direction(TaskKind kind) {
  switch (kind) {
    case TaskKind::FP: return ConvDirection::forward;
    case TaskKind::BP1: return ConvDirection::backward_data;
    case TaskKind::BP2: return ConvDirection::backward_filter;
    case TaskKind::update: break;
  }
  MPLAN_CHECK(false, "the update task is not a convolution");
  return ConvDirection::forward;
}

ConvShape conv_shape(const TaskShape& s) {
  MPLAN_CHECK(s.op == Op::conv && !s.inputs.empty() && s.inputs[0].dims.size() == 3 && s.output.dims.size() == 3,
              "conv_shape: not a conv task with [C, H, W] shapes");
  ConvShape c;
  c.C = s.inputs[0].dims[0];
  c.H = s.inputs[0].dims[1];
  c.W = s.inputs[0].dims[2];
  c.K = s.output.dims[0];
  c.P = s.output.dims[1];
  c.Q = s.output.dims[2];
  c.R = s.window.kernel_h;
  c.S = s.window.kernel_w;
  c.stride_h = s.window.stride_h;
  c.stride_w = s.window.stride_w;
  c.pad_h = s.window.pad_h;
  c.pad_w = s.window.pad_w;
  c.dilation_h = s.window.dilation_h;
  c.dilation_w = s.window.dilation_w;
  c.groups = s.groups;
  c.bias = s.bias;
  return c;
}

namespace {
// splitmix64's finaliser: a well-mixed combination of 64-bit words.
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}
uint64_t mix_shape(uint64_t h, const Shape& shape) {
  h = mix(h, shape.dims.size());
  for (int64_t d : shape.dims) h = mix(h, static_cast<uint64_t>(d));
  return h;
}
}  // namespace

uint64_t task_fingerprint(const Tdfg& tdfg, TaskId t) {
  MPLAN_CHECK(tdfg.model != nullptr, "task_fingerprint: the TDFG has no model");
  const Model& model = *tdfg.model;
  const Task& task = tdfg.tasks.at(t);
  uint64_t h = mix(0x6d706c616eULL, static_cast<uint64_t>(task.kind));
  if (task.kind == TaskKind::update) {
    int64_t parameters = 0, tensors = 0;
    for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
      const int64_t p = model.parameter_count(l);
      parameters += p;
      tensors += p > 0;
    }
    h = mix(h, static_cast<uint64_t>(parameters));
    h = mix(h, static_cast<uint64_t>(tensors));
    h = mix(h, static_cast<uint64_t>(copied_parameters(tdfg)));
    h = mix(h, model.optimizer.momentum > 0);
    // AdamW's update is another kernel (SGD's hash is unchanged, so recorded profiles still apply).
    return model.optimizer.adamw() ? mix(h, 0xada3u) : h;
  }
  const Layer& layer = model.layers.at(task.layer);
  h = mix(h, static_cast<uint64_t>(layer.op));
  const DataType output = tdfg.blocks.at(tdfg.output_of.at(task.layer)).dtype;
  h = mix(h, static_cast<uint64_t>(output));
  h = mix(h, static_cast<uint64_t>(weights_cast_by_task(model, task.layer, task.kind, output)));
  if (is_16_bit(model.precision))
    for_each_block_type(tdfg, layer, task.layer, [&](int kind, DataType t) {
      h = mix(h, static_cast<uint64_t>(kind * 8 + static_cast<int>(t)));
    });
  for (int k = 0; k < static_cast<int>(layer.inputs.size()); ++k) {
    h = mix_shape(h, model.input_shape(task.layer, k));
    // The input's first position, as describe_task keeps it: add(x, x) is
    // not add(x, y).
    h = mix(h, static_cast<uint64_t>(std::find(layer.inputs.begin(), layer.inputs.end(), layer.inputs[k]) -
                                     layer.inputs.begin()));
  }
  h = mix_shape(h, layer.output);
  // Every field of every op, so that whatever an op's signature reads is in
  // the hash (fields an op ignores keep their defaults).
  const Window& w = layer.window;
  for (int64_t v : {layer.out, layer.groups, static_cast<int64_t>(layer.bias), w.kernel_h, w.kernel_w, w.stride_h,
                    w.stride_w, w.pad_h, w.pad_w, w.dilation_h, w.dilation_w, static_cast<int64_t>(layer.pool_mode),
                    static_cast<int64_t>(layer.ceil_mode), layer.lrn_size, static_cast<int64_t>(layer.tanh_approximation),
                    layer.out_h, layer.out_w, layer.axis, layer.begin, layer.end,
                    static_cast<int64_t>(layer.transpose_b), layer.heads, static_cast<int64_t>(layer.compact_backward)})
    h = mix(h, static_cast<uint64_t>(v));
  h = mix(h, layer.shape.size());
  for (int64_t v : layer.shape) h = mix(h, static_cast<uint64_t>(v));
  for (double v : {layer.eps, layer.momentum, layer.alpha, layer.beta, layer.k, layer.p, layer.clip_min,
                   layer.clip_max, layer.scale}) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = mix(h, bits);
  }
  return h;
}

int32_t TaskKeyCache::key(const Tdfg& tdfg, TaskId t) const {
  const uint64_t fingerprint = task_fingerprint(tdfg, t);
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = by_fingerprint_.find(fingerprint);
  if (found != by_fingerprint_.end()) return found->second;
  TaskShape shape = describe_task(tdfg, t);
  const std::string signature = task_signature(shape);
  auto [it, inserted] = index_.emplace(signature, static_cast<int32_t>(entries_.size()));
  if (inserted) entries_.push_back(Entry{shape, layer_signature(shape)});
  by_fingerprint_.emplace(fingerprint, it->second);
  return it->second;
}

const TaskShape& TaskKeyCache::shape(int32_t key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.at(key).shape;
}

const std::string& TaskKeyCache::layer_signature_of(int32_t key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.at(key).layer_signature;
}

}  // namespace mplan
