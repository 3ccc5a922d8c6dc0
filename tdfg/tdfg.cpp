// Building moDNN's TDFG (moDNN §II-2, Fig. 1) from a Model.
//
// The execution order is fixed by construction: FP(l) for every layer in layer
// order, then the backward pass in reverse layer order (BP2(l) before BP1(l)),
// then the update. The order is then checked against a Boost.Graph of the
// data dependencies (tdfg/task_graph.h), so a wrong edge or a wrong order
// aborts here rather than corrupting a plan.

#include "tdfg/tdfg.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "tdfg/task_graph.h"

namespace mplan {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::FP: return "FP";
    case TaskKind::BP1: return "BP1";
    case TaskKind::BP2: return "BP2";
    case TaskKind::update: return "update";
  }
  return "?";
}

const char* block_kind_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::input: return "input";
    case BlockKind::labels: return "labels";
    case BlockKind::output: return "output";
    case BlockKind::gradient: return "gradient";
    case BlockKind::weight: return "weight";
    case BlockKind::weight_grad: return "weight_grad";
    case BlockKind::optimizer_state: return "optimizer_state";
    case BlockKind::saved: return "saved";
    case BlockKind::loss: return "loss";
  }
  return "?";
}

bool has_batch_statistics(const Tdfg& tdfg) {
  for (const Task& t : tdfg.tasks)
    if (t.batch_statistics) return true;
  return false;
}

int64_t Tdfg::resident_bytes() const {
  int64_t total = 0;
  for (const Block& block : blocks)
    if (block.resident) total += block.bytes(0);
  return total;
}

namespace {

// What a backward task reads from the forward pass: the op table's (docs/design.md, TDFG).
BackwardNeeds bp1_needs(const Layer& layer) {
  const OpSpec& spec = op_spec(layer.op);
  return spec.bp1_needs ? spec.bp1_needs(layer) : BackwardNeeds{};
}

BackwardNeeds bp2_needs(const Layer& layer) {
  const OpSpec& spec = op_spec(layer.op);
  return spec.bp2_needs ? spec.bp2_needs(layer) : BackwardNeeds{};
}

class Builder {
 public:
  Builder(const Model& model, const TdfgOptions& options) : model_(model), options_(options) {
    const size_t n = model.layers.size();
    tdfg_.model = &model;
    tdfg_.model_name = model.name;
    tdfg_.model_digest = model_digest(model);
    tdfg_.batch = model.batch;
    tdfg_.evaluation = options.evaluation;
    for (const Layer& l : model.layers) tdfg_.layer_names.push_back(l.name);
    tdfg_.output_of.assign(n, kNoBlock);
    tdfg_.gradient_of.assign(n, kNoBlock);
    tdfg_.weight_of.assign(n, kNoBlock);
    tdfg_.weight_grad_of.assign(n, kNoBlock);
    tdfg_.state_of.assign(n, kNoBlock);
    tdfg_.saved_of.assign(n, kNoBlock);
    tdfg_.fp_of.assign(n, kNoTask);
    tdfg_.bp1_of.assign(n, kNoTask);
    tdfg_.bp2_of.assign(n, kNoTask);
  }

  Tdfg build() {
    check_model();
    find_gradients();
    find_in_place();
    make_blocks();
    for (LayerId l = 0; l < layer_count(); ++l) add_forward(l);
    if (options_.evaluation) {
      check_order_is_topological(tdfg_);
      return std::move(tdfg_);
    }
    for (LayerId l = layer_count() - 1; l >= 0; --l) {
      if (has_bp2(l)) add_bp2(l);
      if (has_bp1(l)) add_bp1(l);
    }
    add_update();
    add_recompute_signatures();
    check_order_is_topological(tdfg_);
    return std::move(tdfg_);
  }

 private:
  LayerId layer_count() const { return static_cast<LayerId>(model_.layers.size()); }
  const Layer& layer(LayerId l) const { return model_.layers[l]; }
  bool is_loss(LayerId l) const { return op_spec(layer(l).op).is_loss; }
  bool has_parameters(LayerId l) const { return model_.parameter_count(l) > 0; }

  void check_model() const {
    MPLAN_CHECK(!model_.layers.empty(), "build_tdfg: the model has no layers");
    MPLAN_CHECK(is_loss(layer_count() - 1), "build_tdfg: the last layer must be the loss");
    for (LayerId l = 0; l < layer_count(); ++l) {
      MPLAN_CHECK(!layer(l).inputs.empty(), "build_tdfg: layer '" + layer(l).name + "' has no input");
      for (LayerId in : layer(l).inputs)
        MPLAN_CHECK(in == kModelInput || (in >= 0 && in < l),
                    "build_tdfg: layer '" + layer(l).name + "' reads a later layer");
      MPLAN_CHECK(!is_loss(l) || l == layer_count() - 1,
                  "build_tdfg: the loss must be the last layer");
    }
  }

  // An output needs a gradient iff its layer or an ancestor has parameters, and
  // some consumer propagates it (a layer whose output reaches no loss gets no
  // gradient: its dY is never made and its dW stays as the update finds it).
  void find_gradients() {
    const LayerId n = layer_count();
    needs_gradient_.assign(n, false);
    for (LayerId l = 0; l < n; ++l) {
      bool needs = has_parameters(l);
      for (LayerId in : layer(l).inputs)
        if (in != kModelInput && needs_gradient_[in]) needs = true;
      needs_gradient_[l] = needs;
    }
    // receives_gradient[l]: a gradient of the loss reaches Y[l] (the loss itself
    // starts the backward pass).
    receives_gradient_.assign(n, false);
    receives_gradient_[n - 1] = true;
    for (LayerId l = n - 1; l >= 0; --l) {
      if (!receives_gradient_[l]) continue;
      for (LayerId in : layer(l).inputs)
        if (in != kModelInput && needs_gradient_[in]) receives_gradient_[in] = true;
    }
  }

  // In-place activations (TdfgOptions::in_place). in_place_[l]: l's output
  // shares the block of its only input p. p's output must have no other
  // consumer (its gradient is then dX of l alone, so BP1(l) may write it into
  // dY[l]'s block); for a ReLU, no backward task may read p's output (the
  // ReLU overwrites it), counting every layer that already shares p's block.
  // A flatten changes no value, so it only needs the single consumer.
  void find_in_place() {
    const LayerId n = layer_count();
    in_place_.assign(n, false);
    bp1_in_place_.assign(n, false);
    in_place_input_.assign(n, 0);
    if (!options_.in_place) return;
    std::vector<int> consumers(n, 0);
    for (LayerId l = 0; l < n; ++l)
      for (LayerId in : layer(l).inputs)
        if (in != kModelInput) ++consumers[in];
    find_bp1_in_place(consumers);
    // root_[l]: the layer whose FP creates l's output block.
    root_.assign(n, 0);
    for (LayerId l = 0; l < n; ++l) {
      root_[l] = l;
      const Layer& ly = layer(l);
      const InPlace mode = op_spec(ly.op).in_place;
      if (mode == InPlace::never || ly.inputs.size() != 1 || ly.inputs[0] == kModelInput) continue;
      const LayerId p = ly.inputs[0];
      if (consumers[p] != 1 || is_loss(p)) continue;
      if (mode == InPlace::overwrites_input && !options_.evaluation && output_read_backward(p)) continue;
      in_place_[l] = true;
      root_[l] = root_[p];
    }
  }

  // Whether a backward task reads p's output, counting every layer that
  // already shares p's block (an in-place layer would overwrite it).
  bool output_read_backward(LayerId p) const {
    for (LayerId q = root_[p]; q <= p; ++q)
      if (root_[q] == root_[p] && (bp1_needs(layer(q)).output || bp2_needs(layer(q)).output)) return true;
    return false;
  }

  // The input whose block an in-place layer l shares (its output and its gradient).
  LayerId in_place_input(LayerId l) const { return layer(l).inputs[static_cast<size_t>(in_place_input_[l])]; }

  // BP1 alone in place (OpSpec::bp1_in_place: batch norm, add): BP1(l)
  // writes dX over dY[l] where an input p of l has no other consumer, so
  // that dY[p] is dX of l alone; an add's dX of that input is dY itself. Of
  // an add's inputs, the first such of dY's type (in_place_input_). BP2(l),
  // which reads dY[l] too, runs before BP1(l) (the task order), and the
  // dependency edges say so (tdfg/task_graph.h).
  void find_bp1_in_place(const std::vector<int>& consumers) {
    if (options_.evaluation) return;
    const LayerTypes types = layer_types(model_);
    for (LayerId l = 0; l < layer_count(); ++l) {
      const Layer& ly = layer(l);
      if (!op_spec(ly.op).bp1_in_place) continue;
      for (size_t k = 0; k < ly.inputs.size() && !bp1_in_place_[l]; ++k) {
        const LayerId p = ly.inputs[k];
        if (p == kModelInput || consumers[p] != 1 || is_loss(p) || types.gradient[p] != types.gradient[l]) continue;
        bp1_in_place_[l] = true;
        in_place_input_[l] = static_cast<int>(k);
      }
    }
  }

  // BP1(l) exists iff some input of l needs a gradient (and one reaches l).
  bool has_bp1(LayerId l) const {
    if (!receives_gradient_[l]) return false;
    for (LayerId in : layer(l).inputs)
      if (in != kModelInput && needs_gradient_[in]) return true;
    return false;
  }
  bool has_bp2(LayerId l) const { return receives_gradient_[l] && has_parameters(l); }
  bool has_gradient_block(LayerId l) const {
    return !options_.evaluation && !is_loss(l) && receives_gradient_[l];
  }
  // Evaluation: batch norm normalises with its running statistics and dropout
  // is the identity; neither saves anything.
  bool evaluates_without_saving(LayerId l) const {
    return options_.evaluation && (op_spec(layer(l).op).forward_updates_state || layer(l).op == Op::dropout);
  }

  BlockId add_block(std::string name, BlockKind kind, LayerId l, int64_t per_sample,
                    int64_t fixed, bool resident) {
    Block block;
    block.name = std::move(name);
    block.kind = kind;
    block.layer = l;
    block.bytes_per_sample = per_sample;
    block.fixed_bytes = fixed;
    block.resident = resident;
    tdfg_.blocks.push_back(std::move(block));
    return static_cast<BlockId>(tdfg_.blocks.size() - 1);
  }

  // Block ids: X, labels, then per layer W, dW, state, Y, saved (loss), then
  // the gradients in layer order.
  void make_blocks() {
    const int64_t dtype = model_.dtype_bytes();
    const LayerTypes types = layer_types(model_);
    tdfg_.gradient_dtype = types.gradient;
    tdfg_.input_block = add_block("X", BlockKind::input, kModelInput,
                                  model_.input.elements() * dtype, 0, false);
    tdfg_.labels_block = add_block("labels", BlockKind::labels, kModelInput, 4, 0, false);
    tdfg_.blocks[tdfg_.labels_block].dtype = DataType::int32;
    for (LayerId l = 0; l < layer_count(); ++l) {
      const Layer& ly = layer(l);
      const int64_t params = model_.parameter_count(l);
      if (params > 0) {
        // A 16-bit layer reads a 16-bit copy of its fp32 master weights,
        // kept resident after them and remade by the update (autocast's
        // weight cast, made once per step).
        const DataType copy_type = weight_copy_type(model_, types, l);
        const int64_t copy = copy_type == DataType::float32 ? 0 : params * element_bytes(copy_type);
        tdfg_.weight_of[l] = add_block("W[" + ly.name + "]", BlockKind::weight, l, 0,
                                       params * dtype + copy, true);
        tdfg_.weight_grad_of[l] = add_block("dW[" + ly.name + "]", BlockKind::weight_grad, l, 0,
                                            params * dtype, true);
      }
      // The optimizer's state (SGD's momentum buffer, AdamW's two moments) and
      // batchnorm running stats.
      const int64_t state_elements = model_.buffer_count(l) + model_.optimizer.state_per_parameter() * params;
      if (state_elements > 0)
        tdfg_.state_of[l] = add_block("state[" + ly.name + "]", BlockKind::optimizer_state, l, 0,
                                      state_elements * dtype, true);
      if (in_place_[l]) {
        // Shares its input's block; the name lists every layer that writes it.
        const BlockId shared = tdfg_.output_of[in_place_input(l)];
        MPLAN_CHECK(tdfg_.blocks[shared].bytes_per_sample == ly.output.elements() * element_bytes(types.output[l]),
                    "build_tdfg: in-place layer '" + ly.name + "' changes its input's size");
        tdfg_.output_of[l] = shared;
        std::string& name = tdfg_.blocks[shared].name;
        name.insert(name.size() - 1, "+" + ly.name);
      } else {
        tdfg_.output_of[l] = add_block("Y[" + ly.name + "]", BlockKind::output, l,
                                       ly.output.elements() * element_bytes(types.output[l]), 0, false);
        tdfg_.blocks[tdfg_.output_of[l]].dtype = types.output[l];
      }
      // What FP keeps for BP (a dropout mask, batch-norm statistics): the op table's.
      if (const OpSpec& spec = op_spec(ly.op); spec.saved != nullptr && !evaluates_without_saving(l)) {
        SavedBytes saved = spec.saved(ly, model_.input_shapes(l), ly.output);
        // A 16-bit op keeps its state in its own type (attention's probabilities).
        if (spec.autocast == Autocast::low_precision && types.output[l] != DataType::float32) {
          saved.per_sample = saved.per_sample / 4 * element_bytes(types.output[l]);
          saved.fixed = saved.fixed / 4 * element_bytes(types.output[l]);
        }
        if (saved.per_sample > 0 || saved.fixed > 0) {
          tdfg_.saved_of[l] = add_block("saved[" + ly.name + "]", BlockKind::saved, l, saved.per_sample,
                                        saved.fixed, false);
          if (spec.autocast == Autocast::low_precision) tdfg_.blocks[tdfg_.saved_of[l]].dtype = types.output[l];
        }
      }
      if (is_loss(l))
        tdfg_.loss_block =
            add_block("loss", BlockKind::loss, l, 0, options_.evaluation ? kEvaluationMetricsBytes : 4, false);
    }
    for (LayerId l = 0; l < layer_count(); ++l) {
      if (!has_gradient_block(l)) continue;
      const LayerId p = layer(l).inputs.empty() ? kModelInput : in_place_input(l);
      if ((in_place_[l] || bp1_in_place_[l]) && tdfg_.gradient_of[p] != kNoBlock) {
        // BP1(l) writes dX into dY[l]: one block, named after every layer that shares it.
        MPLAN_CHECK(tdfg_.blocks[tdfg_.gradient_of[p]].bytes_per_sample ==
                        layer(l).output.elements() * element_bytes(types.gradient[l]),
                    "build_tdfg: layer '" + layer(l).name + "' writes its input's gradient in place at another size");
        tdfg_.gradient_of[l] = tdfg_.gradient_of[p];
        std::string& name = tdfg_.blocks[tdfg_.gradient_of[l]].name;
        name.insert(name.size() - 1, "+" + layer(l).name);
        continue;
      }
      tdfg_.gradient_of[l] = add_block("dY[" + layer(l).name + "]", BlockKind::gradient, l,
                                       layer(l).output.elements() * element_bytes(types.gradient[l]), 0, false);
      tdfg_.blocks[tdfg_.gradient_of[l]].dtype = types.gradient[l];
    }
  }

  BlockId produced(LayerId in) const {
    return in == kModelInput ? tdfg_.input_block : tdfg_.output_of[in];
  }

  // Distinct inputs of l, in order (add: [a, a] reads and writes a once).
  std::vector<LayerId> distinct_inputs(LayerId l) const {
    std::vector<LayerId> result;
    for (LayerId in : layer(l).inputs)
      if (std::find(result.begin(), result.end(), in) == result.end()) result.push_back(in);
    return result;
  }

  TaskId add_task(TaskKind kind, LayerId l) {
    Task task;
    task.kind = kind;
    task.layer = l;
    if (l == kModelInput) {
      task.name = "update";
    } else {
      task.name = fmt::format("{}({})", task_kind_name(kind), layer(l).name);
      task.op = layer(l).op;
      const OpSpec& spec = op_spec(task.op);
      // Convolutions choose among algorithms with different workspaces (moDNN Eq. 5).
      task.has_algorithms = spec.has_algorithms;
      task.paper_class = spec.paper_class;
      // The evaluation normalises with the running statistics: any round will do.
      task.batch_statistics = spec.batch_statistics && !options_.evaluation;
    }
    tdfg_.tasks.push_back(std::move(task));
    return static_cast<TaskId>(tdfg_.tasks.size() - 1);
  }

  void reads(TaskId t, BlockId b) {
    MPLAN_CHECK(b != kNoBlock, "build_tdfg: " + tdfg_.tasks[t].name + " reads a missing block");
    auto& list = tdfg_.tasks[t].reads;
    if (std::find(list.begin(), list.end(), b) != list.end()) return;
    list.push_back(b);
    tdfg_.blocks[b].readers.push_back(t);
  }
  void writes(TaskId t, BlockId b) {
    MPLAN_CHECK(b != kNoBlock, "build_tdfg: " + tdfg_.tasks[t].name + " writes a missing block");
    auto& list = tdfg_.tasks[t].writes;
    if (std::find(list.begin(), list.end(), b) != list.end()) return;
    list.push_back(b);
    tdfg_.blocks[b].writers.push_back(t);
  }

  void add_forward(LayerId l) {
    const TaskId t = add_task(TaskKind::FP, l);
    tdfg_.fp_of[l] = t;
    tdfg_.tasks[t].in_place = in_place_[l];
    for (LayerId in : distinct_inputs(l)) reads(t, produced(in));
    if (tdfg_.weight_of[l] != kNoBlock) reads(t, tdfg_.weight_of[l]);
    if (op_spec(layer(l).op).forward_updates_state && tdfg_.state_of[l] != kNoBlock) {
      // Running mean and variance are updated by every training forward
      // pass, and only read by the evaluation's.
      reads(t, tdfg_.state_of[l]);
      if (!options_.evaluation) writes(t, tdfg_.state_of[l]);
    }
    if (is_loss(l)) reads(t, tdfg_.labels_block);
    writes(t, tdfg_.output_of[l]);
    if (tdfg_.saved_of[l] != kNoBlock) writes(t, tdfg_.saved_of[l]);
    if (is_loss(l)) writes(t, tdfg_.loss_block);
  }

  // The forward data a backward task needs, then its incoming gradient.
  void read_needs(TaskId t, LayerId l, const BackwardNeeds& needs) {
    if (needs.inputs)
      for (LayerId in : distinct_inputs(l)) reads(t, produced(in));
    if (needs.output) reads(t, tdfg_.output_of[l]);
    if (needs.weight) reads(t, tdfg_.weight_of[l]);
    if (needs.saved) reads(t, tdfg_.saved_of[l]);
    if (is_loss(l)) reads(t, tdfg_.labels_block);
    else reads(t, tdfg_.gradient_of[l]);
  }

  void add_bp2(LayerId l) {
    const TaskId t = add_task(TaskKind::BP2, l);
    tdfg_.bp2_of[l] = t;
    read_needs(t, l, bp2_needs(layer(l)));
    writes(t, tdfg_.weight_grad_of[l]);
  }

  void add_bp1(LayerId l) {
    const TaskId t = add_task(TaskKind::BP1, l);
    tdfg_.bp1_of[l] = t;
    tdfg_.tasks[t].in_place =
        (in_place_[l] || bp1_in_place_[l]) && tdfg_.gradient_of[l] == tdfg_.gradient_of[in_place_input(l)];
    read_needs(t, l, bp1_needs(layer(l)));
    for (LayerId in : distinct_inputs(l)) {
      if (in == kModelInput || !needs_gradient_[in]) continue;
      const BlockId grad = tdfg_.gradient_of[in];
      // The first writer creates dY[in]; later consumers of Y[in] accumulate.
      if (!tdfg_.blocks[grad].writers.empty()) reads(t, grad);
      writes(t, grad);
    }
  }

  // One update per iteration: W -= lr * f(dW, state) for every weighted layer.
  void add_update() {
    const TaskId t = add_task(TaskKind::update, kModelInput);
    tdfg_.update_task = t;
    for (LayerId l = 0; l < layer_count(); ++l) {
      for (BlockId b : {tdfg_.weight_of[l], tdfg_.weight_grad_of[l], tdfg_.state_of[l]})
        if (b != kNoBlock) reads(t, b);
    }
    for (LayerId l = 0; l < layer_count(); ++l) {
      for (BlockId b : {tdfg_.weight_of[l], tdfg_.state_of[l]})
        if (b != kNoBlock) writes(t, b);
    }
  }

  // Task::recompute_reads / recompute_writes of every FP task but the loss.
  void add_recompute_signatures() {
    for (LayerId l = 0; l < layer_count(); ++l) {
      if (is_loss(l)) continue;
      Task& task = tdfg_.tasks[tdfg_.fp_of[l]];
      if (op_spec(layer(l).op).recompute_from_saved && tdfg_.saved_of[l] != kNoBlock) {
        // Batch norm: Y = gamma * (X - mean) * invstd + beta with the saved
        // statistics; the running ones (state) are left alone.
        for (LayerId in : distinct_inputs(l)) task.recompute_reads.push_back(produced(in));
        if (tdfg_.weight_of[l] != kNoBlock) task.recompute_reads.push_back(tdfg_.weight_of[l]);
        task.recompute_reads.push_back(tdfg_.saved_of[l]);
        task.recompute_writes.push_back(tdfg_.output_of[l]);
        continue;
      }
      // Any other op runs exactly as it first did (dropout draws the same
      // mask: a pure function of seed, step, sample and element).
      for (BlockId b : task.reads)
        if (!tdfg_.blocks[b].resident || tdfg_.blocks[b].kind == BlockKind::weight) task.recompute_reads.push_back(b);
      for (BlockId b : task.writes)
        if (!tdfg_.blocks[b].resident) task.recompute_writes.push_back(b);
    }
  }

  const Model& model_;
  const TdfgOptions options_;
  Tdfg tdfg_;
  std::vector<bool> needs_gradient_;
  std::vector<bool> receives_gradient_;
  std::vector<bool> in_place_;
  std::vector<bool> bp1_in_place_;
  std::vector<int> in_place_input_;  // per layer: the index in its inputs of the one it shares
  std::vector<LayerId> root_;
};

}  // namespace

Tdfg build_tdfg(const Model& model, const TdfgOptions& options) { return Builder(model, options).build(); }

Tdfg build_evaluation_tdfg(const Model& model) {
  TdfgOptions options;
  options.evaluation = true;
  return build_tdfg(model, options);
}

}  // namespace mplan
