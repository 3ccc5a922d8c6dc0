// The update task: torch.optim.SGD or AdamW over every layer with parameters
// (not an op of the format, but its kernels are described here like the ops'), with
// biases and normalisation parameters out of the weight decay where the
// optimizer says so, and the 16-bit copies of the weights remade after it.

#include "ops/op_helpers.h"

namespace mplan {

namespace {

// The runs of a layer's parameters (in W's order) that share a weight decay:
// (first element, count, decay). One run unless the optimizer leaves biases or
// normalisation parameters out of the decay.
struct DecayRun {
  int64_t first = 0, count = 0;
  double decay = 0;
};

std::vector<DecayRun> decay_runs(const Model& model, LayerId l) {
  const Optimizer& o = model.optimizer;
  const int64_t count = model.parameter_count(l);
  if (!o.no_decay_biases && !o.no_decay_norms) return {{0, count, o.weight_decay}};
  const Layer& layer = model.layers[l];
  const bool norm = layer.op == Op::batchnorm || layer.op == Op::layernorm;
  const OpSpec& spec = op_spec(layer.op);
  std::vector<DecayRun> runs;
  int64_t at = 0;
  for (const LayerTensor& t : spec.parameters(layer, model.input_shapes(l))) {
    const bool excluded = (o.no_decay_norms && norm) || (o.no_decay_biases && t.name == "bias");
    const double decay = excluded ? 0.0 : o.weight_decay;
    if (!runs.empty() && runs.back().decay == decay) runs.back().count += t.elements();
    else runs.push_back({at, t.elements(), decay});
    at += t.elements();
  }
  MPLAN_CHECK(at == count, "update: the parameter layout of " + layer.name);
  return runs;
}

}  // namespace

Invocation update_invocation(const Model& model) {
  Invocation out;
  const bool momentum = model.optimizer.momentum > 0;
  const LayerTypes types = layer_types(model);
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const int64_t count = model.parameter_count(l);
    if (count == 0) continue;
    const int32_t w = out.slot({TensorRole::weight, 0, l}), g = out.slot({TensorRole::weight_grad, 0, l});
    for (const DecayRun& run : decay_runs(model, l)) {
      const int64_t offset = run.first;  // in floats
      if (model.optimizer.adamw()) {
        // exp_avg and exp_avg_sq head the layer's state block, each laid out as W.
        const int32_t state = out.slot({TensorRole::state, 0, l});
        const Optimizer& o = model.optimizer;
        out.call(rt::Kernel::adamw_step,
                 {rt::Arg::tensor(w, offset), rt::Arg::tensor(g, offset), rt::Arg::tensor(state, offset),
                  rt::Arg::tensor(state, count + offset), rt::Arg::of(run.count), rt::Arg::of(rt::Variable::lr),
                  rt::Arg::of_real(o.beta1), rt::Arg::of_real(o.beta2), rt::Arg::of_real(o.eps),
                  rt::Arg::of_real(run.decay), rt::Arg::of(rt::Variable::step)});
        continue;
      }
      // The momentum buffer is the head of the layer's state block, laid out as W.
      const rt::Arg buffer =
          momentum ? rt::Arg::tensor(out.slot({TensorRole::state, 0, l}), offset) : rt::Arg::null();
      out.call(rt::Kernel::sgd_step,
               {rt::Arg::tensor(w, offset), rt::Arg::tensor(g, offset), buffer, rt::Arg::of(run.count),
                rt::Arg::of(rt::Variable::lr), rt::Arg::of_real(static_cast<float>(model.optimizer.momentum)),
                rt::Arg::of_real(static_cast<float>(run.decay)), rt::Arg::of(rt::Variable::first_update),
                rt::Arg::of_flag(model.optimizer.nesterov)});
    }
    // A 16-bit layer's copy of its weights, after the float32 ones in W, is
    // remade from them (autocast casts the weights once per step).
    if (const DataType copy = weight_copy_type(model, types, l); copy != DataType::float32) {
      const int32_t w = out.slot({TensorRole::weight, 0, l});
      out.call(rt::Kernel::cast_from_float,
               {rt::Arg::tensor(w), rt::Arg::tensor(w, count * element_bytes(DataType::float32)), rt::Arg::of(count),
                rt::Arg::of(static_cast<int64_t>(storage_type(copy))),
                rt::Arg::of(static_cast<int64_t>(rt::StorageType::float32)), rt::Arg::of_flag(false)});
    }
  }
  return out;
}

}  // namespace mplan
