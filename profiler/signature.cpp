#include "profiler/signature.h"

#include <fmt/format.h>

namespace mplan {

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
    if (model.optimizer.momentum > 0) shape.state_elements = shape.parameters;
    return shape;
  }
  const Layer& layer = model.layers.at(task.layer);
  shape.op = layer.op;
  for (int k = 0; k < static_cast<int>(layer.inputs.size()); ++k) shape.inputs.push_back(model.input_shape(task.layer, k));
  shape.output = layer.output;
  switch (layer.op) {
    case Op::conv:
      shape.out = layer.out;
      shape.groups = layer.groups;
      shape.bias = layer.bias;
      shape.window = layer.window;
      break;
    case Op::linear:
      shape.out = layer.out;
      shape.bias = layer.bias;
      break;
    case Op::pool:
      shape.window = layer.window;
      shape.pool_mode = layer.pool_mode;
      break;
    case Op::lrn: shape.lrn_size = layer.lrn_size; break;
    default: break;
  }
  return shape;
}

std::string layer_signature(const TaskShape& s) {
  if (s.kind == TaskKind::update)
    return fmt::format("update parameters={} state={} tensors={}", s.parameters, s.state_elements, s.tensors);
  std::string text = op_name(s.op);
  text += " in=";
  for (size_t i = 0; i < s.inputs.size(); ++i) text += (i ? "+" : "") + s.inputs[i].to_string();
  text += " out=" + s.output.to_string();
  const Window& w = s.window;
  switch (s.op) {
    case Op::conv:
      text += fmt::format(" kernel={}x{} stride={}x{} pad={}x{} groups={} bias={}", w.kernel_h, w.kernel_w,
                          w.stride_h, w.stride_w, w.pad_h, w.pad_w, s.groups, s.bias ? 1 : 0);
      break;
    case Op::linear: text += fmt::format(" bias={}", s.bias ? 1 : 0); break;
    case Op::pool:
      text += fmt::format(" mode={} kernel={}x{} stride={}x{} pad={}x{}", s.pool_mode == PoolMode::max ? "max" : "avg",
                          w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w);
      break;
    case Op::lrn: text += fmt::format(" size={}", s.lrn_size); break;
    default: break;
  }
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
  c.groups = s.groups;
  c.bias = s.bias;
  return c;
}

int32_t TaskKeyCache::key(const Tdfg& tdfg, TaskId t) const {
  std::lock_guard<std::mutex> lock(mutex_);
  PerTdfg& seen = per_tdfg_[&tdfg];
  const Task& task = tdfg.tasks.at(t);
  if (seen.model != tdfg.model || seen.keys.size() != tdfg.tasks.size()) {
    seen.model = tdfg.model;
    seen.keys.assign(tdfg.tasks.size(), -1);
    seen.names.assign(tdfg.tasks.size(), std::string());
  }
  if (seen.keys[t] >= 0 && seen.names[t] == task.name) return seen.keys[t];
  TaskShape shape = describe_task(tdfg, t);
  const std::string signature = task_signature(shape);
  auto [it, inserted] = index_.emplace(signature, static_cast<int32_t>(entries_.size()));
  if (inserted) entries_.push_back(Entry{shape, layer_signature(shape)});
  seen.keys[t] = it->second;
  seen.names[t] = task.name;
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
