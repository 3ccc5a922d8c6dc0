#pragma once
// The entry of an element-wise activation (relu, hardswish, hardsigmoid, silu,
// sigmoid, gelu, clip), built from what differs between them: y has x's
// shape; FP runs the forward kernel (x, y, count, extra...), BP1 the backward
// one (x, or y where the derivative is exact from it, then dy, dx, count,
// extra..., accumulate). Its work: one read and one write per element
// forward, two reads and a write backward. A cheap layer in SuperNeurons'
// terms (§3.4: ACT), recomputed rather than checkpointed.

#include <vector>

#include "ops/op_helpers.h"

namespace mplan::ops {

// What differs between the activations' tasks.
struct ActivationKernels {
  rt::Kernel forward;
  rt::Kernel backward;
  // BP1 reads Y rather than X (relu, sigmoid, clip).
  bool backward_reads_output = false;
  // The analytic model's arithmetic per element, forward; backward does twice as much.
  int flops_per_element = 0;
  // The arguments after the count, from the layer's fields (gelu's
  // approximation, clip's range); null: none.
  std::vector<rt::Arg> (*extra)(const Layer& layer) = nullptr;
};

namespace detail {

ShapeOrMessage same_shape(const Layer& layer, const ShapeInputs& in);
BackwardNeeds reads_input(const Layer& layer);
BackwardNeeds reads_output(const Layer& layer);
void invoke_activation(const OpTask& task, const InvocationContext& ctx, Invocation& out, const ActivationKernels& k);
std::vector<WorkEstimate> activation_work(const OpTask& task, int64_t b, int flops_per_element);

template <const ActivationKernels& K>
void invoke(const OpTask& task, const InvocationContext& ctx, Invocation& out) {
  invoke_activation(task, ctx, out, K);
}
template <const ActivationKernels& K>
std::vector<WorkEstimate> work(const OpTask& task, int64_t b) {
  return activation_work(task, b, K.flops_per_element);
}

}  // namespace detail

// The entry: `spec` names the op and gives what else differs (fields, a shape
// check, in-place); the rest comes from K, a constexpr ActivationKernels of
// the op's file (activation_spec<kKernels>({.op = Op::silu, .name = "silu"})).
template <const ActivationKernels& K>
OpSpec activation_spec(OpSpec spec) {
  if (spec.infer_shape == nullptr) spec.infer_shape = detail::same_shape;
  spec.bp1_needs = K.backward_reads_output ? detail::reads_output : detail::reads_input;
  spec.paper_class = PaperClass::cheap;
  spec.work = detail::work<K>;
  spec.invoke = detail::invoke<K>;
  return spec;
}

}  // namespace mplan::ops
