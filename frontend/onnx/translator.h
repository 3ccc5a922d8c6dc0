#pragma once
// The importer's translation of ONNX nodes to mplan layers (importer-internal).
//
// Every ONNX value becomes a Value: a constant (shape arithmetic, scalars),
// a parameter (an initializer, or a graph input other than the image), a
// tensor (an mplan layer's output, the "base", seen through a View), or a
// pending pattern (a piece of SiLU, GELU or attention, a Pad before a conv)
// that becomes a layer when its pattern completes, or when something else
// consumes it. Nodes are visited in the file's order, which ONNX requires to
// be topological, so layers come out in topological order too.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/view.h"

namespace mplan::onnx_import {

// A layer of the model file being written.
struct OutLayer {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;  // layer names, or "input"
  std::vector<std::pair<std::string, std::string>> fields;  // key, YAML value
  std::string note;                 // a comment: what it was made from, when not one node of its op
  std::vector<std::string> params;  // the ONNX parameters it uses (counted, mapped)
  bool bias_foldable = false;       // a linear layer without bias, which a following Add may give one
  int64_t out_features = 0;         // its `out`, for that Add's check
  int feature_axis = 0;             // the base axis (1-based) of its features

  void set(const std::string& key, const std::string& value);
};

// A tensor of the graph over an mplan layer's output.
struct TensorRef {
  int base = -1;  // index of the base (Translator::bases_)
  View view;
};

struct Pending {
  enum class Kind {
    scaled,         // x * factor
    sigmoid_of,     // sigmoid(x)
    hardsigmoid_of, // hardsigmoid(x)
    erf_half,       // erf(x / sqrt 2)
    one_plus_erf,   // 1 + erf(x / sqrt 2)
    gelu_twice,     // x * (1 + erf(x / sqrt 2))
    square,         // x * x        (GELU's tanh form: x + 0.044715 x^3 ...)
    cube,           // x * x * x, or Pow(x, 3)
    cubic,          // x + factor * x^3
    tanh_of,        // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    one_plus_tanh,  // 1 + that
    gelu_tanh_twice,  // x * (1 + that)
    scores,         // q @ k^T * factor (attention)
    probs,          // softmax(scores)
    padded,         // zero padding of x's spatial axes
    expanded,       // a parameter broadcast over the batch (a class token)
  };
  Kind kind = Kind::scaled;
  std::string x;          // the ONNX value it is of
  std::string y;          // scores: k (as multiplied, k^T's value)
  double factor = 1.0;    // scaled, scores
  int64_t pad_h = 0, pad_w = 0;
  std::string node;       // the node that made it
};

struct Value {
  enum class Kind { unknown, constant, param, tensor, pending };
  Kind kind = Kind::unknown;
  // constant: integers (which may hold the batch) or reals, of shape dims
  std::vector<int64_t> dims;
  std::vector<Dim> ints;
  std::vector<double> reals;
  bool real = false;
  // param: the ONNX name, its dims (above), whether used transposed
  std::string param;
  bool transposed = false;
  // tensor
  TensorRef tensor;
  // pending
  Pending pending;

  int64_t elements() const;
};

// A value that is the tensor t.
inline Value tensor_value(const TensorRef& t) {
  Value v;
  v.kind = Value::Kind::tensor;
  v.tensor = t;
  return v;
}

struct Problem {
  std::string node, op_type, attributes, reason;
};

class Translator {
 public:
  Translator(const Graph& graph, const ImportOptions& options, std::string file);
  // Translates the whole graph; the model text, or every problem.
  Result<ImportResult> run();

 private:
  // ---- values -----------------------------------------------------------------------------------
  const Value& value(const std::string& name) const;
  void define(const std::string& name, Value v);
  Value constant_ints(std::vector<Dim> ints, std::vector<int64_t> dims) const;
  Value constant_reals(std::vector<double> reals, std::vector<int64_t> dims) const;
  // A new base: the output of layer `layer` with per-sample dims, seen plainly.
  Value new_tensor(int layer, std::vector<int64_t> dims);
  // The same view over a new base of the same shape (an element-wise op's output).
  Value tensor_like(int layer, const TensorRef& like);
  // The tensor a value is, making the layers a pending pattern stands for;
  // nullopt (and a problem) when it is no tensor.
  std::optional<TensorRef> tensor(const std::string& name, const Node& node);
  // The tensor as its base's plain layout of ONNX rank `rank` (a per-sample
  // reshape, a channel shuffle, ViT's patch sequence get a layer); nullopt
  // (and a problem) when it cannot be.
  std::optional<TensorRef> plain(const std::string& name, const Node& node, std::optional<size_t> rank = {});
  int64_t consumers(const std::string& name) const;
  // Integer and real constants of an input ("" or missing: nullopt, no problem).
  std::optional<std::vector<Dim>> ints_of(const std::string& name) const;
  std::optional<std::vector<int64_t>> numbers_of(const std::string& name) const;  // without the batch
  std::optional<double> scalar_of(const std::string& name) const;

  // ---- layers -----------------------------------------------------------------------------------
  // Adds a layer on `inputs` (bases); returns its index.
  int emit(const std::string& name, const std::string& op, const std::vector<int>& input_bases,
           std::vector<std::pair<std::string, std::string>> fields = {}, std::string note = {});
  std::string unique_name(const std::string& onnx_name);
  // A copy: bases_ grows while callers still use the dims (a reference into
  // it dangled after a push_back; ASan found it in ViT's patch embedding).
  std::vector<int64_t> base_dims(int base) const { return bases_.at(static_cast<size_t>(base)).dims; }
  int base_layer(int base) const { return bases_.at(static_cast<size_t>(base)).layer; }

  // ---- problems ---------------------------------------------------------------------------------
  void refuse(const Node& node, std::string reason);
  bool has_unknown_input(const Node& node) const;

  // ---- nodes (translate_*.cpp) ----------------------------------------------------------------
  void translate(const Node& node);
  bool translate_constant(const Node& node);  // shape arithmetic on constants; false: not all inputs constant
  // translate_constant's ops, one each (true: handled, a refusal included).
  bool fold_constant_node(const Node& node);
  bool fold_shape_of(const Node& node);
  bool fold_cast(const Node& node);
  bool fold_arithmetic(const Node& node);
  bool fold_negation(const Node& node);
  bool fold_square_root(const Node& node);
  bool fold_squeeze(const Node& node);
  bool fold_concat(const Node& node);
  bool fold_gather(const Node& node);
  bool fold_slice(const Node& node);
  bool fold_constant_of_shape(const Node& node);
  bool fold_where(const Node& node);
  bool fold_reshape(const Node& node);
  bool fold_expand(const Node& node);
  void translate_conv(const Node& node);
  void translate_batchnorm(const Node& node);
  void translate_pool(const Node& node);
  void translate_global_pool(const Node& node);
  void translate_activation(const Node& node);
  void translate_matmul(const Node& node);
  void translate_gemm(const Node& node);
  void translate_add(const Node& node);
  void translate_mul(const Node& node);
  void translate_div(const Node& node);
  void translate_softmax(const Node& node);
  void translate_layernorm(const Node& node);
  void translate_concat(const Node& node);
  void translate_slice(const Node& node);
  void translate_split(const Node& node);
  void translate_gather(const Node& node);
  void translate_view_op(const Node& node);  // Reshape, Flatten, Transpose, Unsqueeze, Squeeze
  void translate_dropout(const Node& node);
  void translate_pad(const Node& node);
  void translate_expand(const Node& node);
  void translate_reduce_mean(const Node& node);
  // A linear (or, over the channels of feature maps, 1x1 conv) layer on x
  // with the weight parameter (out, in); its output value.
  std::optional<Value> linear(const Node& node, const std::string& x, const Value& weight, const Value* bias);
  // An attention layer from probs (pending) @ v.
  void attention(const Node& node, const Value& probs, const std::string& v);
  // Emits a slice layer of base axis `axis` (1-based) of x's base, [begin, end).
  std::optional<Value> slice(const Node& node, const std::string& x, int64_t onnx_axis, int64_t begin, int64_t end,
                             const std::string& name);

  // ---- the end ------------------------------------------------------------------------------------
  void pack_attention_inputs();  // q, k, v slices of one projection -> its packed form
  std::string yaml(const std::string& output_layer, int64_t classes, int64_t batch,
                   const std::vector<int64_t>& input_dims, int64_t onnx_parameters) const;

  struct Base {
    int layer = -1;  // -1: the model's input
    std::vector<int64_t> dims;
    bool retired = false;  // a conv turned patch_embed: its feature-map view is gone
  };

  const Graph& graph_;
  const ImportOptions& options_;
  std::string file_;
  std::map<std::string, Value> values_;
  std::map<std::string, int64_t> consumers_;
  std::vector<Base> bases_;
  std::vector<OutLayer> layers_;
  std::map<std::string, int> used_names_;
  std::vector<Problem> problems_;
  std::vector<std::string> notes_;
  std::optional<Precision> precision_;  // written to the YAML (ImportOptions::precision, or the input's type)
  std::map<std::string, int64_t> parameter_elements_;  // ONNX parameters' sizes
  int64_t graph_batch_ = -1;                            // the image input's batch dimension, -1 if not fixed
};

}  // namespace mplan::onnx_import
