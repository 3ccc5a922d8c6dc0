// ONNX's protobuf messages (onnx/onnx-ml.pb.h) to the plain graph of onnx_graph.h.

#include "frontend/onnx/onnx_graph.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mplan::onnx_import {
namespace {

ElementType element_type(int32_t onnx_type) {
  switch (onnx_type) {
    case ::onnx::TensorProto_DataType_FLOAT: return ElementType::float32;
    case ::onnx::TensorProto_DataType_DOUBLE: return ElementType::float64;
    case ::onnx::TensorProto_DataType_FLOAT16: return ElementType::float16;
    case ::onnx::TensorProto_DataType_BFLOAT16: return ElementType::bfloat16;
    case ::onnx::TensorProto_DataType_INT64: return ElementType::int64;
    case ::onnx::TensorProto_DataType_INT32: return ElementType::int32;
    case ::onnx::TensorProto_DataType_INT8: return ElementType::int8;
    case ::onnx::TensorProto_DataType_UINT8: return ElementType::uint8;
    case ::onnx::TensorProto_DataType_BOOL: return ElementType::boolean;
    default: return ElementType::other;
  }
}

template <typename T>
void read_raw(const std::string& raw, int64_t count, std::vector<double>& out) {
  out.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[static_cast<size_t>(i)] = static_cast<double>(v);
  }
}

// The values of a small numeric tensor, from raw_data or the typed fields.
// External data and float16 are left without values.
void read_values(const ::onnx::TensorProto& t, Tensor& out) {
  const int64_t count = out.elements();
  if (count < 0 || count > kSmallTensorElements || t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL)
    return;
  const std::string& raw = t.raw_data();
  auto from_raw = [&](size_t bytes, auto reader) {
    if (raw.size() != bytes * static_cast<size_t>(count)) return;
    reader();
    out.has_values = true;
  };
  switch (out.type) {
    case ElementType::float32:
      if (!raw.empty()) return from_raw(4, [&] { read_raw<float>(raw, count, out.values); });
      if (t.float_data_size() != count) return;
      for (float v : t.float_data()) out.values.push_back(v);
      break;
    case ElementType::float64:
      if (!raw.empty()) return from_raw(8, [&] { read_raw<double>(raw, count, out.values); });
      if (t.double_data_size() != count) return;
      for (double v : t.double_data()) out.values.push_back(v);
      break;
    case ElementType::int64:
      if (!raw.empty()) return from_raw(8, [&] { read_raw<int64_t>(raw, count, out.values); });
      if (t.int64_data_size() != count) return;
      for (int64_t v : t.int64_data()) out.values.push_back(static_cast<double>(v));
      break;
    case ElementType::int32:
    case ElementType::int8:
    case ElementType::uint8:
    case ElementType::boolean:
      if (!raw.empty()) {
        if (out.type == ElementType::int32) return from_raw(4, [&] { read_raw<int32_t>(raw, count, out.values); });
        if (out.type == ElementType::int8) return from_raw(1, [&] { read_raw<int8_t>(raw, count, out.values); });
        return from_raw(1, [&] { read_raw<uint8_t>(raw, count, out.values); });
      }
      if (t.int32_data_size() != count) return;
      for (int32_t v : t.int32_data()) out.values.push_back(v);
      break;
    default: return;
  }
  out.has_values = true;
}

Tensor tensor_of(const ::onnx::TensorProto& t) {
  Tensor out;
  for (int64_t d : t.dims()) out.dims.push_back(d);
  out.type = element_type(t.data_type());
  read_values(t, out);
  return out;
}

Attribute attribute_of(const ::onnx::AttributeProto& a) {
  Attribute out;
  switch (a.type()) {
    case ::onnx::AttributeProto_AttributeType_FLOAT:
      out.kind = Attribute::Kind::real;
      out.real = a.f();
      break;
    case ::onnx::AttributeProto_AttributeType_INT:
      out.kind = Attribute::Kind::integer;
      out.integer = a.i();
      break;
    case ::onnx::AttributeProto_AttributeType_STRING:
      out.kind = Attribute::Kind::text;
      out.text = a.s();
      break;
    case ::onnx::AttributeProto_AttributeType_TENSOR:
      out.kind = Attribute::Kind::tensor;
      out.tensor = tensor_of(a.t());
      break;
    case ::onnx::AttributeProto_AttributeType_FLOATS:
      out.kind = Attribute::Kind::reals;
      for (float v : a.floats()) out.reals.push_back(v);
      break;
    case ::onnx::AttributeProto_AttributeType_INTS:
      out.kind = Attribute::Kind::integers;
      for (int64_t v : a.ints()) out.integers.push_back(v);
      break;
    default: out.kind = Attribute::Kind::other; break;
  }
  return out;
}

ValueInfo value_info_of(const ::onnx::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) return out;
  const auto& tensor = v.type().tensor_type();
  out.type = element_type(tensor.elem_type());
  if (!tensor.has_shape()) return out;
  out.has_shape = true;
  for (const auto& d : tensor.shape().dim()) out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return out;
}

}  // namespace

int64_t Tensor::elements() const {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 50) / d)) return -1;
    count *= d;
  }
  return count;
}

std::string Attribute::to_string() const {
  auto list = [](const auto& values) {
    std::string text = "[";
    for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + fmt::format("{}", values[i]);
    return text + "]";
  };
  switch (kind) {
    case Kind::real: return fmt::format("{}", real);
    case Kind::integer: return std::to_string(integer);
    case Kind::text: return "'" + text + "'";
    case Kind::tensor: return "tensor" + list(tensor.dims);
    case Kind::reals: return list(reals);
    case Kind::integers: return list(integers);
    case Kind::other: return "(graph)";
  }
  return "?";
}

const Attribute* Node::attribute(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

std::string Node::attributes_text() const {
  std::string text;
  for (const auto& [key, value] : attributes) text += (text.empty() ? "" : " ") + key + "=" + value.to_string();
  return text.empty() ? "(no attributes)" : text;
}

Result<Graph> parse_onnx(const std::string& bytes, const std::string& file) {
  ::onnx::ModelProto model;
  if (bytes.empty()) return Error{{file, 0, 0}, "the file is empty (expected an ONNX model)"};
  if (!model.ParseFromString(bytes) || !model.has_graph())
    return Error{{file, 0, 0}, "not an ONNX model (the file is not a ModelProto with a graph)"};
  Graph g;
  g.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  for (const auto& opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") g.opset = opset.version();
  const ::onnx::GraphProto& graph = model.graph();
  for (const auto& t : graph.initializer()) g.initializers[t.name()] = tensor_of(t);
  for (const auto& v : graph.input()) g.inputs.push_back(value_info_of(v));
  for (const auto& v : graph.output()) g.outputs.push_back(value_info_of(v));
  int index = 0;
  for (const auto& n : graph.node()) {
    Node node;
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
    for (const auto& i : n.input()) node.inputs.push_back(i);
    for (const auto& o : n.output()) node.outputs.push_back(o);
    for (const auto& a : n.attribute()) node.attributes[a.name()] = attribute_of(a);
    g.nodes.push_back(std::move(node));
    ++index;
  }
  if (g.nodes.empty()) return Error{{file, 0, 0}, "the ONNX graph has no nodes"};
  return g;
}

Result<Graph> read_onnx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{{path, 0, 0}, fmt::format("cannot read the ONNX file: {}", std::strerror(errno))};
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Error{{path, 0, 0}, "cannot read the ONNX file: read error"};
  return parse_onnx(bytes.str(), path);
}

}  // namespace mplan::onnx_import
