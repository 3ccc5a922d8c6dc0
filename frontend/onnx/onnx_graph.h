#pragma once
// An ONNX model as plain data: the one place that reads ONNX's protobuf
// schema (onnx/onnx-ml.proto, Debian's libonnx-dev), so the importer sees
// nodes, attributes and tensor shapes, not protobuf messages.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace mplan::onnx_import {

// ONNX's element types the importer tells apart (TensorProto.DataType).
enum class ElementType { float32, float64, float16, bfloat16, int64, int32, int8, uint8, boolean, other };

// A tensor of the file (an initializer or a Constant's value): its shape, and
// its values when it is small (shape arithmetic, scalars of patterns).
struct Tensor {
  std::vector<int64_t> dims;
  ElementType type = ElementType::other;
  bool has_values = false;
  std::vector<double> values;  // row-major, when has_values
  int64_t elements() const;
};

struct Attribute {
  enum class Kind { real, integer, text, tensor, reals, integers, other };
  Kind kind = Kind::other;
  double real = 0;
  int64_t integer = 0;
  std::string text;
  Tensor tensor;
  std::vector<double> reals;
  std::vector<int64_t> integers;
  std::string to_string() const;  // "[1, 2]", "0.5", "'tanh'"
};

struct Node {
  std::string name;  // may be empty in the file; read_onnx names those "<op_type>_<index>"
  std::string op_type;
  std::string domain;
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  const Attribute* attribute(const std::string& key) const;
  // "kernel_shape=[3, 3] strides=[1, 1]": every attribute, for messages.
  std::string attributes_text() const;
};

// A graph input or output: its element type and shape (a dimension without a
// fixed size, a named "batch" or an unknown, is -1).
struct ValueInfo {
  std::string name;
  ElementType type = ElementType::other;
  std::vector<int64_t> dims;
  bool has_shape = false;
};

struct Graph {
  std::string producer;  // "pytorch 1.13.0"
  int64_t opset = 0;     // of the default domain
  std::vector<Node> nodes;  // in the file's (topological) order
  std::map<std::string, Tensor> initializers;
  std::vector<ValueInfo> inputs;  // initializers listed as inputs included
  std::vector<ValueInfo> outputs;
};

// Tensors of at most this many elements keep their values.
inline constexpr int64_t kSmallTensorElements = 4096;

// Reads an .onnx file. Errors name the file: missing, unreadable, not an
// ONNX model, a graph the importer cannot read (a subgraph, external data of
// a tensor whose values it needs).
Result<Graph> read_onnx(const std::string& path);
// The same from the bytes of a file (tests build models in memory).
Result<Graph> parse_onnx(const std::string& bytes, const std::string& file);

}  // namespace mplan::onnx_import
