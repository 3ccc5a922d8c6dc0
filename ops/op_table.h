#pragma once
// The op table: everything mplan knows about each op, in one place per op
// (ops/<op>.cpp), read by every stage:
//
//   frontend   the fields and their defaults, the input count, shape inference,
//              the parameter tensors (and with them the parameter count)
//   tdfg       what FP leaves behind for BP (saved bytes), what BP1 and BP2
//              read from the forward pass (the TDFG's edges), whether FP
//              updates non-learnable state (batch norm's running statistics)
//   profiler   the work of each task for the analytic model (convolutions:
//              per algorithm, profiler/conv_algorithms.h), the fixed scratch a
//              task needs, and the fields that make two layers cost the same
//   runtime    the kernels a task calls and with what (runtime/kernel_call.h):
//              codegen prints them, the CPU profiler and the standalone kernel
//              profiler run them
//
// Adding an op: a line in ops/ops.def, its entry in
// ops/<op>.cpp, its kernels in runtime/ (docs/architecture.md lists
// the files). Nothing else switches on Op.

#include <cstdint>
#include <string>
#include <vector>

#include "ops/model.h"
#include "runtime/kernel_call.h"

namespace mplan {

class MapReader;  // core/yaml_reader.h

// The tasks of a layer in moDNN's TDFG (moDNN §II-2): FP, BP1 (the gradient
// w.r.t. the inputs), BP2 (the weight gradient); and the update.
enum class TaskKind { FP, BP1, BP2, update };

// ---- frontend ----------------------------------------------------------------------

// Either an output shape or what is wrong (without the layer's name or place:
// the caller adds them).
struct ShapeOrMessage {
  Shape shape;
  std::string error;  // empty when `shape` is valid
  bool ok() const { return error.empty(); }
};

// The shapes of a layer's inputs, with names for messages, and the model's
// class count (the loss checks it).
struct ShapeInputs {
  const std::vector<Shape>& shapes;
  const std::vector<std::string>& names;
  int64_t classes = 0;
};

// How a tensor of the weights file starts (docs/generated-program.md).
enum class TensorInit { zeros, ones, uniform_fan_in };

// One tensor of a layer's parameters or of its non-learnable state, in the
// order they lie in the W (or state) block: name suffix ("weight", "bias",
// "running_mean"), PyTorch's shape, and its initialisation.
struct LayerTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorInit init = TensorInit::zeros;
  int64_t fan_in = 0;  // uniform_fan_in: bound 1/sqrt(fan_in), PyTorch's default
  int64_t elements() const;
};

// ---- tdfg ---------------------------------------------------------------------------

// What a backward task reads from the forward pass: the TDFG's edges
// (docs/architecture.md, tdfg), so liveness, offloading and recomputation are
// only as good as these.
struct BackwardNeeds {
  bool inputs = false;  // the layer's inputs (Y of the producers, or X)
  bool output = false;  // the layer's Y
  bool weight = false;  // W
  bool saved = false;   // the saved block (dropout mask, batch-norm statistics)
};

// Whether FP may write Y into its input's block (in-place activations, as
// Caffe, Torch and PyTorch do and as vDNN assumes; TdfgOptions::in_place).
// The TDFG decides per layer: the input must have no other consumer.
enum class InPlace {
  never,
  // Y replaces X's values (relu): the op's own backward must not read X, and
  // it is refused where a backward task reads the input's block.
  overwrites_input,
  // Y holds X's values (flatten, a view): wherever X has no other consumer.
  view,
};

// How the baselines' papers class a layer: vDNN offloads and prefetches
// around CONV layers (vDNN §III); SuperNeurons checkpoints the outputs of
// CONV and FC layers and recomputes the cheap ones, POOL, ACT, LRN and BN
// (SuperNeurons §3.3-3.4).
enum class PaperClass { other, conv, fully_connected, cheap };

// Bytes of the saved block FP writes for BP: per sample and fixed.
struct SavedBytes {
  int64_t per_sample = 0;
  int64_t fixed = 0;
};

// ---- profiler -----------------------------------------------------------------------

// How a kernel uses the device, for the analytic model's efficiency.
enum class WorkClass { streaming, gemm };

// The work of one kernel of a task at sub-batch b (docs/cost-model.md, "Time
// of a kernel"): arithmetic, memory traffic, independent output items, launches.
struct WorkEstimate {
  double flops = 0;
  double bytes = 0;
  double parallel_items = 1;
  WorkClass work_class = WorkClass::streaming;
  int kernels = 1;
};

// A task of one layer as the table sees it: no TDFG, no plan.
struct OpTask {
  const Layer& layer;
  const std::vector<Shape>& inputs;  // per sample
  const Shape& output;               // per sample
  TaskKind kind;
  // Bytes of an element of its activations (the output's type, ops/precision.h):
  // what the work estimates move per element.
  double element_bytes = 4;
  // FP run again from what it saved (OpSpec::recompute_from_saved): its
  // work, and its kernels, are the recomputation's.
  bool recompute = false;
};

// ---- runtime ------------------------------------------------------------------------

// Where the tensor of a kernel argument comes from: a block of the TDFG (of
// the task's own layer unless `layer` says otherwise), or the task's workspace.
enum class TensorRole {
  input,           // Y of the index-th input's producer (X for the model's input)
  output,          // Y
  gradient,        // dY, the gradient arriving at Y
  input_gradient,  // dY of the index-th input's producer (the dX this task writes)
  weight,          // W
  weight_grad,     // dW
  state,           // optimizer state and running statistics
  saved,           // the saved block
  labels,          // the round's labels
  loss,            // the round's summed loss
  workspace,       // the task's planned workspace
  cast_scratch,    // a 16-bit task's float scratch around its kernels (ops/sixteen_bit_invocation.h), outside the plan
};
const char* tensor_role_name(TensorRole role);

struct TensorRef {
  TensorRole role = TensorRole::input;
  int index = 0;            // input and input_gradient: which input
  LayerId layer = kModelInput;  // kModelInput: the task's own layer
  bool operator==(const TensorRef&) const = default;
};

// Everything the kernels of one task depend on besides the layer.
struct InvocationContext {
  int64_t samples = 0;  // the round's sub-batch
  int64_t batch = 0;    // B, the loss is averaged over it
  // BP1: per input, whether this task writes its gradient, and whether it adds
  // to it (an earlier consumer of the same tensor wrote it first; TDFG).
  std::vector<bool> writes_input_gradient;
  std::vector<bool> accumulates_input_gradient;
  // An FP task run again from what it saved (SuperNeurons §3.4 recomputation).
  bool recompute = false;
  // Convolutions: the algorithm (an id of the target backend) or the
  // micro-batches (mu-cuDNN), and the planned workspace.
  rt::ConvAlgoId algorithm = 0;
  std::vector<rt::ConvMicroBatch> micro_batches;
  int64_t workspace_bytes = 0;
  // The evaluation pass (TdfgOptions::evaluation): batch norm with its
  // running statistics, dropout as the identity, the loss's metrics.
  bool evaluation = false;
  // Optimizer state per parameter at the head of every state block
  // (Optimizer::state_per_parameter): SGD's momentum buffer, AdamW's moments.
  int64_t optimizer_state_per_parameter = 0;
};

// The kernels of one task: tensor argument `slot` of a call is tensors[slot].
struct Invocation {
  std::vector<TensorRef> tensors;
  std::vector<rt::KernelCall> calls;

  // The slot of a tensor, added if new.
  int32_t slot(TensorRef ref);
  // A tensor argument of the role (with an element offset).
  rt::Arg tensor(TensorRole role, int index = 0, int64_t offset_elements = 0);
  void call(rt::Kernel kernel, std::vector<rt::Arg> args);
};

// ---- the entry ----------------------------------------------------------------------

struct OpSpec {
  Op op;
  const char* name;

  // Fields (besides name, op, in), read into a Layer with the format's
  // defaults; null when the op has none. Fails at the offending node.
  std::vector<std::string> fields = {};
  void (*read_fields)(const MapReader& entry, Layer& layer) = nullptr;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: any number
  // The output shape (the input count is checked before).
  ShapeOrMessage (*infer_shape)(const Layer& layer, const ShapeInputs& in) = nullptr;
  // Parameter tensors (W's layout) and non-learnable state tensors; null: none.
  std::vector<LayerTensor> (*parameters)(const Layer& layer, const std::vector<Shape>& inputs) = nullptr;
  std::vector<LayerTensor> (*buffers)(const Layer& layer, const std::vector<Shape>& inputs) = nullptr;

  SavedBytes (*saved)(const Layer& layer, const std::vector<Shape>& inputs, const Shape& output) = nullptr;
  BackwardNeeds (*bp1_needs)(const Layer& layer) = nullptr;
  BackwardNeeds (*bp2_needs)(const Layer& layer) = nullptr;
  // FP reads and writes the state block (batch norm's running statistics).
  bool forward_updates_state = false;
  // In-place FP and BP1 (dX written into dY's block) where the TDFG allows.
  InPlace in_place = InPlace::never;
  // BP1 alone in place: it may write dX over the dY it reads, where the TDFG
  // allows (the input has no other consumer), though FP keeps its own output.
  // Batch norm: dX comes from dY and per-channel sums taken first, each
  // element of dY read before its dX is written, so the backward pass keeps
  // one gradient tensor where it kept two. Add: the gradient of one input is
  // dY itself, so BP1 writes only the other inputs' gradients.
  bool bp1_in_place = false;
  // A recomputed FP (SuperNeurons §3.4) reads the saved block instead of
  // writing it and leaves the state alone: batch norm normalises again with
  // the saved mean and inverse std (its invoke with ctx.recompute), so the
  // recomputed Y is exact and the running statistics are updated once.
  bool recompute_from_saved = false;
  // FP's statistics are over the samples of the call (batch norm), so a
  // split batch changes what the model learns: the planner prefers one round
  // and refuses rounds with fewer than two values per channel (planner.md).
  bool batch_statistics = false;
  // A memory-saving form of BP1 (docs/planner.md, "Memory-saving variants";
  // MONeT's operator variants): true where this layer can take it. A layer
  // given Layer::compact_backward has an FP that also writes a compact record
  // into the saved block (relu: a bit per element; max pool: the place of each
  // window's maximum), and a BP1 that reads that record and dY only, with the
  // same dX bit for bit. The entry's saved, bp1_needs, work and invoke read
  // the flag. Null: the op has no such form.
  bool (*has_compact_backward)(const Layer& layer) = nullptr;
  // The layer's class in the baselines' papers (planner/deciders).
  PaperClass paper_class = PaperClass::other;
  // The loss: the model's last layer; FP reads the labels and writes the
  // round's loss, BP1 starts the backward pass from the labels (no dY).
  bool is_loss = false;
  // The cost model lists algorithms (convolutions); its work is then the
  // algorithm's (profiler/conv_algorithms.h), not `work`.
  bool has_algorithms = false;

  // The fields that change a task's cost, as " key=value" text (the profile's
  // signature adds the op, the kind and the shapes); null: none.
  std::string (*signature)(const Layer& layer) = nullptr;
  // The analytic model's work of a task at sub-batch b (not for algorithms).
  std::vector<WorkEstimate> (*work)(const OpTask& task, int64_t b) = nullptr;
  // Scratch a task needs at sub-batch b besides an algorithm's workspace
  // (batch norm's BP1: two floats per channel); null: none.
  int64_t (*scratch_bytes)(const OpTask& task, int64_t b) = nullptr;

  // The kernels of a task (FP, BP1 or BP2; FP with ctx.recompute for a recomputation).
  void (*invoke)(const OpTask& task, const InvocationContext& ctx, Invocation& out) = nullptr;

  // The output's type at 16-bit precision (ops/precision.h; PyTorch
  // autocast's op lists: torch.amp's "lower precision" and "float32" ops).
  Autocast autocast = Autocast::follow_inputs;
};

// The entry of an op; every Op has one.
const OpSpec& op_spec(Op op);
// Every entry, in Op order.
const std::vector<const OpSpec*>& all_op_specs();

// The kernels of the update task: one SGD step per layer with parameters
// (torch.optim.SGD; the tensors name their layer).
Invocation update_invocation(const Model& model);

// The storage types of each layer's output and of its gradient at the
// model's precision (docs/model-format.md, "Precision"): every block float32
// at fp32 and tf32; at bf16 and fp16 as each op's OpSpec::autocast says, the
// model's input being float32. A float32 output whose every consumer is a
// 16-bit op, and whose own backward does not read it (layer norm's; an op
// that may run in place keeps its input's block, so never), is stored in 16
// bits: autocast would cast it at each consumer and keep only
// the casts, so the cast is fused into the producer; its gradient stays
// float32 (the casts' backward adds the consumers' gradients in float32).
struct LayerTypes {
  std::vector<DataType> output, gradient;
};
LayerTypes layer_types(const Model& model);
// The type of the copy of its float32 parameters that a layer's W block
// keeps after them: a 16-bit op's at 16-bit precision (autocast's weight
// cast, remade by the update); float32 where the layer keeps none.
DataType weight_copy_type(const Model& model, const LayerTypes& types, LayerId l);
// The parameters a task casts into a 16-bit copy as it reads them, where the
// model makes its weight copies where they are used
// (Model::weight_copies_where_used): a 16-bit op's FP, and its BP1 where that
// reads the weights; 0 otherwise. `output` is the layer's output type.
int64_t weights_cast_by_task(const Model& model, LayerId l, TaskKind kind, DataType output);
// Whether any layer of the model keeps or makes a 16-bit copy of its weights.
bool has_weight_copies(const Model& model);

// Shortcuts over the entry.
int64_t layer_parameter_count(const Layer& layer, const std::vector<Shape>& inputs);
int64_t layer_buffer_count(const Layer& layer, const std::vector<Shape>& inputs);

}  // namespace mplan
