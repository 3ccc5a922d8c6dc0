#pragma once
// moDNN's task and data-flow graph (moDNN §II-2, Fig. 1) for one
// sub-batch of a Model, plus the once-per-iteration update.
//
// Tasks: FP(l) for every layer; BP1(l) (gradient w.r.t. the layer's inputs)
// when some input of l needs a gradient; BP2(l) (weight gradient, accumulated
// over sub-batches) when l has parameters; one update task at the end.
// Blocks: layer outputs Y, gradients dY, weights W and their gradients dW and
// optimizer state, the input batch X and labels, and op-specific saved state
// (dropout masks, batchnorm saved statistics). Block sizes are functions of the
// sub-batch b: bytes(b) = bytes_per_sample * b + fixed_bytes.
//
// Plain data with integer ids; the Boost.Graph used to order tasks stays in
// tdfg/*.cpp. Tasks are stored in execution order (a topological order).

#include <cstdint>
#include <string>
#include <vector>

#include "ops/model.h"
#include "ops/op_table.h"

namespace mplan {

using TaskId = int32_t;
using BlockId = int32_t;
inline constexpr TaskId kNoTask = -1;
inline constexpr BlockId kNoBlock = -1;

// TaskKind (FP, BP1, BP2, update) is in ops/op_table.h.
const char* task_kind_name(TaskKind kind);  // "FP", "BP1", "BP2", "update"

enum class BlockKind {
  input,        // the sub-batch of images
  labels,       // the sub-batch of labels (int32 per sample)
  output,       // Y[l]: a layer's output
  gradient,     // dY[l]: gradient of the loss w.r.t. Y[l], summed over Y[l]'s consumers
  weight,       // W[l]: weights and bias (resident)
  weight_grad,  // dW[l]: accumulated over the sub-batches of an iteration (resident)
  optimizer_state,  // momentum buffer and batchnorm running statistics (resident)
  saved,        // op state kept from FP for BP: dropout mask, batchnorm mean/invstd
  loss,         // the scalar loss of a sub-batch
};
const char* block_kind_name(BlockKind kind);

struct Block {
  std::string name;            // "Y[conv1]", "dY[conv1]", "W[conv1]", "X", ...
  BlockKind kind = BlockKind::output;
  LayerId layer = kModelInput; // the layer it belongs to (kModelInput for X, labels)
  int64_t bytes_per_sample = 0;
  int64_t fixed_bytes = 0;
  // The type of its elements (ops/precision.h): a layer's output and its
  // gradient as autocast makes them at the model's precision; the input,
  // weights, their gradients and the optimizer state float32 (the weights of
  // a 16-bit layer are followed by their 16-bit copy in the same block); the
  // labels int32; saved state and the loss as their op stores them.
  DataType dtype = DataType::float32;
  // Resident blocks (weights, their gradients, optimizer state) live on the
  // device for the whole run; moDNN §II-2 never offloads them.
  bool resident = false;
  // Tasks that write the block. The first creates it; for a gradient with
  // several consumers of Y, later writers accumulate into it (read-modify-write,
  // so they are also listed in `readers`). dW blocks are written by BP2 of every
  // sub-batch; the Tdfg holds one sub-batch, so that is one writer here.
  std::vector<TaskId> writers;
  // Tasks that read the block, in execution order.
  std::vector<TaskId> readers;

  int64_t bytes(int64_t sub_batch) const { return bytes_per_sample * sub_batch + fixed_bytes; }
};

struct Task {
  std::string name;            // "FP(conv1)", "BP1(conv1)", "update"
  TaskKind kind = TaskKind::FP;
  LayerId layer = kModelInput; // kModelInput for the update
  Op op = Op::relu;            // the layer's op (meaningless for update)
  std::vector<BlockId> reads;  // blocks read (for accumulating writers: the block too)
  std::vector<BlockId> writes; // blocks written
  // Conv tasks choose an algorithm that may need workspace (cost model).
  bool has_algorithms = false;
  // The layer's class in the baselines' papers (ops/op_table.h PaperClass):
  // vDNN offloads around CONV layers, SuperNeurons checkpoints CONV and FC
  // outputs and recomputes the cheap ones. `other` for the update.
  PaperClass paper_class = PaperClass::other;
  // The layer's FP computes statistics over the round's samples (batch
  // norm): a split batch changes what the model learns (docs/planner.md).
  bool batch_statistics = false;
  // FP(relu) or FP(flatten) computed in place: it reads and writes the one
  // block its input and output share (TdfgOptions::in_place); its BP1 writes
  // dX into dY's block the same way. BP1(batchnorm) may be in place alone
  // (OpSpec::bp1_in_place): it writes dX over dY, after BP2 read dY.
  bool in_place = false;
  // How the task runs again when a block it writes is recomputed
  // (SuperNeurons §3.4): what the recomputation reads and writes. Both empty
  // when the task is never recomputed (backward tasks, the update, the loss).
  // Equal to reads / writes except for exactly recomputable state:
  // FP(batchnorm) recomputes Y from X, W and the saved mean and inverse std
  // (reads saved, leaves the running statistics alone); FP(dropout) writes Y
  // and the mask again (the mask is a pure function of seed, step, sample and
  // element, runtime/cpu/dropout.cpp).
  std::vector<BlockId> recompute_reads = {};
  std::vector<BlockId> recompute_writes = {};
};

struct Tdfg {
  // The model it was built from (not owned), for the stages that read its
  // layers (the cost models, codegen). The planner never does: what it needs
  // of the model is below and in the tasks and blocks.
  const Model* model = nullptr;
  std::string model_name;
  std::string model_digest;        // model_digest(model): plans record it
  int64_t batch = 1;               // the model's mini-batch B
  std::vector<std::string> layer_names;  // per layer
  std::vector<Task> tasks;         // execution order for one sub-batch, update last
  std::vector<Block> blocks;
  TaskId update_task = kNoTask;
  BlockId input_block = kNoBlock;
  BlockId labels_block = kNoBlock;
  BlockId loss_block = kNoBlock;
  // Per layer: its blocks, kNoBlock where it has none. Layers computed in
  // place share their input's output and gradient blocks.
  std::vector<BlockId> output_of, gradient_of, weight_of, weight_grad_of, state_of, saved_of;
  // Per layer: its tasks, kNoTask where it has none.
  std::vector<TaskId> fp_of, bp1_of, bp2_of;
  // Per layer: the storage type of its gradient (ops/op_table.h
  // LayerTypes::gradient), in an evaluation graph too, which has no gradient
  // blocks: a task's signature names it (profiler/signature.h).
  std::vector<DataType> gradient_dtype;
  // An evaluation graph (TdfgOptions::evaluation): the forward pass alone.
  bool evaluation = false;

  // Sum of resident blocks' bytes (independent of the sub-batch): moDNN's SW.
  int64_t resident_bytes() const;
};

struct TdfgOptions {
  // In-place activations (as Caffe, Torch and PyTorch do, and as vDNN assumes):
  // a ReLU whose input has no other consumer and no backward task that needs
  // it writes its output into its input's block, and its BP1 writes dX into
  // dY's block; a flatten (a view) does the same whenever its input has no
  // other consumer. The two layers then share one output block, named
  // "Y[a+b]" (and one gradient block, "dY[a+b]"), created by the first
  // layer's FP and rewritten by the in-place FP. A batch norm whose input has
  // no other consumer writes its BP1's dX over dY the same way
  // (OpSpec::bp1_in_place), though its output keeps its own block: its input
  // and output gradients are one block, "dY[conv+bn]", and its BP2, which
  // reads dY too, runs first.
  bool in_place = true;
  // The evaluation pass instead of a training step (docs/generated-program.md,
  // "Evaluation"): FP tasks alone, no gradients and no update. Batch norm
  // normalises with its running statistics (reads its state, writes neither
  // state nor saved statistics), dropout passes its input through, and the
  // loss task writes the round's summed loss, top-1 and top-5 hits and
  // counted samples (4 floats). The resident blocks are the training graph's,
  // in the same order and of the same sizes, so both plans place the weights
  // at the same offsets. Every ReLU and flatten with a single consumer of its
  // input runs in place (no backward task needs the input).
  bool evaluation = false;
};

// Whether some task computes statistics over its round's samples (batch
// norm): then a split batch changes what the model learns (docs/planner.md).
bool has_batch_statistics(const Tdfg& tdfg);

// Builds the TDFG of a validated model. Aborts (MPLAN_CHECK) on an invalid
// Model: validation is the frontend's job. Order: FP(l) in layer order, then in
// reverse layer order BP2(l) (if l has parameters) before BP1(l), then the
// update; the order is checked against the data dependencies (Boost.Graph,
// tdfg/task_graph.h). FP(batchnorm) reads and writes state (running stats);
// the update reads every W, dW and state and writes W and state.
Tdfg build_tdfg(const Model& model, const TdfgOptions& options = {});

// The evaluation graph of `model` (TdfgOptions::evaluation).
Tdfg build_evaluation_tdfg(const Model& model);

// The bytes of an evaluation graph's loss block: loss, top-1, top-5, samples.
inline constexpr int64_t kEvaluationMetricsBytes = 4 * 4;

// Checks structural invariants (ids in range, every read block has a writer
// earlier in the order, resident blocks are not per-sample, ...); returns the
// first violation. Tests run it after every build.
Status check_tdfg(const Tdfg& tdfg);

// Graphviz text of the TDFG (tasks as boxes, blocks as ellipses), via Boost.
std::string tdfg_to_dot(const Tdfg& tdfg);

}  // namespace mplan
