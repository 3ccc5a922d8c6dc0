#pragma once
// The validated model: what the frontend produces from a model YAML file
// (docs/model-format.md) and every later stage reads. Plain data; layers are
// indexed by LayerId in topological order (every input precedes its user).

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/limits.h"
#include "ops/precision.h"

namespace mplan {

using LayerId = int32_t;
// The model's input batch, as an entry of Layer::inputs.
inline constexpr LayerId kModelInput = -1;

// Every op of the model format (ops/ops.def; the op table,
// ops/op_table.h, says everything about each).
enum class Op {
#define MPLAN_OP(name) name,
#include "ops/ops.def"
#undef MPLAN_OP
};
const char* op_name(Op op);  // "conv", "softmax_xent", ...

enum class PoolMode { max, avg };

// A per-sample shape: [C, H, W] for feature maps, [N] for vectors.
struct Shape {
  std::vector<int64_t> dims;
  int64_t elements() const;       // product of dims
  std::string to_string() const;  // "[64, 56, 56]"
  bool operator==(const Shape&) const = default;
};

// Whether every dimension is >= 1 and the product is at most kMaxElements
// (computed without overflow, unlike Shape::elements).
bool is_valid_size(const Shape& shape);

// Kernel window of conv and pool layers (and patch_embed's patch).
struct Window {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // conv only
  bool operator==(const Window&) const = default;
};

struct Layer {
  std::string name;              // unique; generated ("conv_3") when the file has none
  Op op = Op::relu;
  std::vector<LayerId> inputs;   // kModelInput for the model's input
  Shape output;                  // per-sample output shape, inferred
  SourceLocation where;          // where the layer is written in the file

  // conv and patch_embed: out channels; linear: out features.
  int64_t out = 0;
  // conv: groups (channel_shuffle: groups); conv, linear and patch_embed: whether there is a bias.
  int64_t groups = 1;
  bool bias = true;
  // conv and pool.
  Window window;
  // pool.
  PoolMode pool_mode = PoolMode::max;
  bool ceil_mode = false;
  // batchnorm (and layernorm's eps).
  double eps = 1e-5;
  double momentum = 0.1;
  // lrn (cuDNN/PyTorch semantics: size, alpha, beta, k).
  int64_t lrn_size = 5;
  double alpha = 1e-4, beta = 0.75, k = 2.0;
  // dropout.
  double p = 0.5;
  // softmax_xent: PyTorch's CrossEntropyLoss(label_smoothing=...), in [0, 1).
  double label_smoothing = 0.0;
  // gelu: the tanh approximation instead of the erf form.
  bool tanh_approximation = false;
  // clip: the range (relu6 is [0, 6]).
  double clip_min = 0.0, clip_max = 6.0;
  // adaptive_avgpool: the output size.
  int64_t out_h = 1, out_w = 1;
  // slice: [begin, end) of axis `axis` of the per-sample shape.
  int64_t axis = 0, begin = 0, end = 0;
  // reshape: the per-sample output shape.
  std::vector<int64_t> shape;
  // matmul: the second input is used transposed (a @ b^T).
  bool transpose_b = false;
  // attention: heads; scale of the scores, 0 for 1/sqrt(head dimension).
  int64_t heads = 1;
  double scale = 0.0;

  // The memory-saving form of the layer's backward (OpSpec::has_compact_backward;
  // docs/planner.md, "Memory-saving variants"). Not a field of the model
  // format and not in model_digest: the planner chooses it on its copy of the
  // model, and the plan names the layers (docs/plan-format.md).
  bool compact_backward = false;
};

struct Optimizer {
  std::string kind = "sgd";  // sgd (torch.optim.SGD) or adamw (torch.optim.AdamW)
  double lr = 0.01;
  double momentum = 0.9;  // sgd
  double weight_decay = 0.0;
  // adamw: betas and eps.
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // torch.optim.SGD(nesterov=True); needs momentum > 0, as PyTorch does.
  bool nesterov = false;
  // Parameters the weight decay leaves out: every layer's bias ("bias"
  // tensors), and every normalisation layer's parameters (batchnorm and
  // layernorm weight and bias), as two parameter groups in PyTorch.
  bool no_decay_biases = false;
  bool no_decay_norms = false;

  bool adamw() const { return kind == "adamw"; }
  // Optimizer state per parameter, at the head of each layer's state block:
  // SGD's momentum buffer (with momentum), AdamW's two moments.
  int64_t state_per_parameter() const { return adamw() ? 2 : momentum > 0 ? 1 : 0; }
};

struct Model {
  std::string name;
  std::string source_file;      // the YAML it was read from ("" if built in code)
  Shape input;                  // per-sample input shape [C, H, W]
  int64_t batch = 1;            // the user's mini-batch B
  int64_t classes = 0;
  std::string dtype = "float32";
  // The arithmetic of convolutions and GEMMs (docs/model-format.md): "default"
  // (the GPU's default: tf32 on Ampere and later, fp32 before), "fp32" or "tf32".
  std::string math = "default";
  // The precision of the tensors (docs/model-format.md, `precision`): fp32 or
  // tf32 keep every tensor float32; bf16 and fp16 store what autocast makes
  // 16-bit in 16 bits (ops/precision.h), and `math` is then the same mode.
  Precision precision = Precision::fp32;
  // A planner's choice, not the format's (docs/planner.md, "16-bit weight
  // copies"): a 16-bit op's weights are cast into a 16-bit copy where each
  // task uses them, instead of a copy kept resident and remade by the update.
  bool weight_copies_where_used = false;
  Optimizer optimizer;
  std::vector<Layer> layers;    // topological order; the loss is last

  // Bytes of a float32 element: the input data, master weights, their
  // gradients and the optimizer state (layer outputs: layer_output_types).
  int64_t dtype_bytes() const { return 4; }

  // The per-sample shape of input k of layer l (the model input or a layer output).
  const Shape& input_shape(LayerId l, int k = 0) const;
  // All of layer l's input shapes, in order.
  std::vector<Shape> input_shapes(LayerId l) const;
  // Learnable parameters of a layer (weights and bias; batchnorm gamma and beta).
  int64_t parameter_count(LayerId l) const;
  int64_t parameter_count() const;  // whole model
  // Non-learnable state kept with the weights (batchnorm running mean and var).
  int64_t buffer_count(LayerId l) const;
  // Finds a layer by name; -1 if there is none. A block instance name ("layer1",
  // "layer1.0") finds the instance's output, its last layer, as `in:` does.
  LayerId find(const std::string& name) const;
};

// Sets the model's precision and folds it into `math` (docs/model-format.md):
// fp32 and tf32 set math to the same mode and need it to be default or that
// mode; bf16 and fp16 set math to the 16-bit mode and need it default.
// `replace` (the command line's --precision): the file's math and precision
// are replaced, not checked.
Status apply_precision(Model& model, Precision precision, bool replace = false);

// A stable hash of the model's content (name, input, batch, layers and their
// fields, optimizer), as 16 hex digits; equal models give equal digests. A
// plan records it (planner/plan.h), so that a plan is never run with another model.
std::string model_digest(const Model& model);

}  // namespace mplan
