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
