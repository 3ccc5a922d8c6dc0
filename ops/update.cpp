// The update task: torch.optim.SGD over every layer with parameters (not an
// op of the format, but its kernels are described here like the ops'), and
// the 16-bit copies of the weights remade after it.

#include "ops/op_helpers.h"

namespace mplan {

Invocation update_invocation(const Model& model) {
  Invocation out;
  const bool momentum = model.optimizer.momentum > 0;
  const LayerTypes types = layer_types(model);
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const int64_t count = model.parameter_count(l);
    if (count == 0) continue;
    // The momentum buffer is the head of the layer's state block.
    const rt::Arg buffer =
        momentum ? rt::Arg::tensor(out.slot({TensorRole::state, 0, l})) : rt::Arg::null();
    out.call(rt::Kernel::sgd_step,
             {rt::Arg::tensor(out.slot({TensorRole::weight, 0, l})), rt::Arg::tensor(out.slot({TensorRole::weight_grad, 0, l})),
              buffer, rt::Arg::of(count), rt::Arg::of(rt::Variable::lr),
              rt::Arg::of_real(static_cast<float>(model.optimizer.momentum)),
              rt::Arg::of_real(static_cast<float>(model.optimizer.weight_decay)),
              rt::Arg::of(rt::Variable::first_update)});
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
