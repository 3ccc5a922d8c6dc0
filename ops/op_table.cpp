// The registry of the op table (ops/op_table.h) and what its entries share.

#include "ops/op_table.h"

#include <algorithm>

#include "core/error.h"

namespace mplan {
namespace ops {
#define MPLAN_OP(name) extern const OpSpec name##_spec;
#include "ops/ops.def"
#undef MPLAN_OP
}  // namespace ops

const std::vector<const OpSpec*>& all_op_specs() {
  static const std::vector<const OpSpec*> specs = [] {
    std::vector<const OpSpec*> list = {
#define MPLAN_OP(name) &ops::name##_spec,
#include "ops/ops.def"
#undef MPLAN_OP
    };
    for (size_t i = 0; i < list.size(); ++i)
      MPLAN_CHECK(static_cast<size_t>(list[i]->op) == i, "op table: entry " + std::string(list[i]->name) +
                                                                " is not in Op order (ops/ops.def)");
    return list;
  }();
  return specs;
}

const OpSpec& op_spec(Op op) {
  const auto& specs = all_op_specs();
  const size_t index = static_cast<size_t>(op);
  MPLAN_CHECK(index < specs.size(), "op_spec: unknown op");
  return *specs[index];
}

const char* op_name(Op op) { return op_spec(op).name; }

int64_t LayerTensor::elements() const {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

int64_t layer_parameter_count(const Layer& layer, const std::vector<Shape>& inputs) {
  const OpSpec& spec = op_spec(layer.op);
  if (spec.parameters == nullptr) return 0;
  int64_t total = 0;
  for (const LayerTensor& t : spec.parameters(layer, inputs)) total += t.elements();
  return total;
}

LayerTypes layer_types(const Model& model) {
  const size_t n = model.layers.size();
  LayerTypes types{std::vector<DataType>(n, DataType::float32), std::vector<DataType>(n, DataType::float32)};
  if (!is_16_bit(model.precision)) return types;
  const DataType low = low_precision_type(model.precision);
  std::vector<DataType>& computed = types.gradient;  // autocast's type of each output
  for (size_t l = 0; l < n; ++l) {
    const Layer& layer = model.layers[l];
    DataType widest = low;
    bool first = true;
    for (LayerId in : layer.inputs) {
      const DataType t = in == kModelInput ? DataType::float32 : computed[static_cast<size_t>(in)];
      widest = first ? t : wider_type(widest, t);
      first = false;
    }
    switch (op_spec(layer.op).autocast) {
      case Autocast::follow_inputs: computed[l] = widest; break;
      case Autocast::follow_inputs_and_weight: computed[l] = DataType::float32; break;
      case Autocast::low_precision: computed[l] = low; break;
      case Autocast::float32: computed[l] = DataType::float32; break;
    }
  }
  // The casts fused into their producer.
  std::vector<bool> only_low_consumers(n, true), consumed(n, false);
  for (const Layer& layer : model.layers)
    for (LayerId in : layer.inputs) {
      if (in == kModelInput) continue;
      consumed[static_cast<size_t>(in)] = true;
      if (op_spec(layer.op).autocast != Autocast::low_precision) only_low_consumers[static_cast<size_t>(in)] = false;
    }
  for (size_t l = 0; l < n; ++l) {
    types.output[l] = computed[l];
    const OpSpec& spec = op_spec(model.layers[l].op);
    const bool reads_output = (spec.bp1_needs && spec.bp1_needs(model.layers[l]).output) ||
                              (spec.bp2_needs && spec.bp2_needs(model.layers[l]).output);
    if (computed[l] == DataType::float32 && consumed[l] && only_low_consumers[l] && !reads_output &&
        spec.in_place == InPlace::never)
      types.output[l] = low;
  }
  return types;
}

DataType weight_copy_type(const Model& model, const LayerTypes& types, LayerId l) {
  const size_t at = static_cast<size_t>(l);
  if (model.weight_copies_where_used || model.parameter_count(l) == 0 || types.output.at(at) == DataType::float32 ||
      op_spec(model.layers.at(at).op).autocast != Autocast::low_precision)
    return DataType::float32;
  return types.output[at];
}

int64_t weights_cast_by_task(const Model& model, LayerId l, TaskKind kind, DataType output) {
  if (!model.weight_copies_where_used || output == DataType::float32 || l < 0) return 0;
  const Layer& layer = model.layers.at(static_cast<size_t>(l));
  const OpSpec& spec = op_spec(layer.op);
  if (spec.autocast != Autocast::low_precision) return 0;
  const bool reads = kind == TaskKind::FP || (kind == TaskKind::BP1 && spec.bp1_needs && spec.bp1_needs(layer).weight);
  return reads ? model.parameter_count(l) : 0;
}

bool has_weight_copies(const Model& model) {
  if (!is_16_bit(model.precision)) return false;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l)
    if (model.parameter_count(l) > 0 && op_spec(model.layers[l].op).autocast == Autocast::low_precision) return true;
  return false;
}

int64_t layer_buffer_count(const Layer& layer, const std::vector<Shape>& inputs) {
  const OpSpec& spec = op_spec(layer.op);
  if (spec.buffers == nullptr) return 0;
  int64_t total = 0;
  for (const LayerTensor& t : spec.buffers(layer, inputs)) total += t.elements();
  return total;
}

const char* tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::input: return "input";
    case TensorRole::output: return "output";
    case TensorRole::gradient: return "gradient";
    case TensorRole::input_gradient: return "input_gradient";
    case TensorRole::weight: return "weight";
    case TensorRole::weight_grad: return "weight_grad";
    case TensorRole::state: return "state";
    case TensorRole::saved: return "saved";
    case TensorRole::labels: return "labels";
    case TensorRole::loss: return "loss";
    case TensorRole::workspace: return "workspace";
    case TensorRole::cast_scratch: return "cast_scratch";
  }
  return "?";
}

int32_t Invocation::slot(TensorRef ref) {
  auto it = std::find(tensors.begin(), tensors.end(), ref);
  if (it != tensors.end()) return static_cast<int32_t>(it - tensors.begin());
  tensors.push_back(ref);
  return static_cast<int32_t>(tensors.size() - 1);
}

rt::Arg Invocation::tensor(TensorRole role, int index, int64_t offset_elements) {
  return rt::Arg::tensor(slot(TensorRef{role, index, kModelInput}), offset_elements);
}

void Invocation::call(rt::Kernel kernel, std::vector<rt::Arg> args) {
  rt::KernelCall c{kernel, std::move(args)};
  const std::string why = rt::check_kernel_call(c, static_cast<int32_t>(tensors.size()));
  MPLAN_CHECK(why.empty(), "op table: " + why);
  calls.push_back(std::move(c));
}

}  // namespace mplan
