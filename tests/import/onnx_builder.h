#pragma once
// Builds small ONNX models in memory for the importer's tests: inputs,
// parameters (shapes only, as torch.onnx.export(export_params=False) writes
// them), nodes with attributes, and the serialized bytes.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace mplan::onnx_test {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("mplan-test");
    model_.add_opset_import()->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("test");
  }

  // A float input; a negative dimension is left without a size (dynamic).
  void input(const std::string& name, std::vector<int64_t> dims) { value(graph_->add_input(), name, dims); }
  void output(const std::string& name, std::vector<int64_t> dims = {}) { value(graph_->add_output(), name, dims); }
  // A parameter: a graph input with a shape, no values.
  void param(const std::string& name, std::vector<int64_t> dims) { input(name, dims); }
  // An int64 constant (shape arithmetic) as a Constant node.
  void constant_ints(const std::string& name, std::vector<int64_t> values, bool scalar = false) {
    onnx::NodeProto* n = node("Constant", {}, {name}, name + "_node");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  void constant_real(const std::string& name, float value) {
    onnx::NodeProto* n = node("Constant", {}, {name}, name + "_node");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(value);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& key, std::vector<int64_t> values) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void integer(onnx::NodeProto* n, const std::string& key, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const std::string& key, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  // Gives a graph input another element type (onnx::TensorProto::FLOAT16, ...).
  void input_type(const std::string& name, int32_t elem_type) {
    for (onnx::ValueInfoProto& v : *graph_->mutable_input())
      if (v.name() == name) v.mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  void value(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tensor = v->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = tensor->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("batch");
    }
  }

  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
};

}  // namespace mplan::onnx_test
