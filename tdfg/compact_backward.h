#pragma once
// Which layers take their memory-saving backward (OpSpec::has_compact_backward;
// docs/planner.md, "Memory-saving variants"): a ReLU keeping a bit per element
// instead of its output, a max pool keeping the place of each maximum instead
// of its input and output (the operator variants of MONeT, docs/references.md).
// The compact form only pays where it lets the backward pass drop a tensor
// that no other backward task reads; elsewhere it would add its record to
// what is kept anyway.

#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"

namespace mplan {

// The layers whose compact backward frees a tensor of the backward pass: a
// ReLU whose output no other backward task reads, a max pool whose input or
// output no other backward task reads, each judged with the others' choices
// (a ReLU before a max pool frees its output only if the pool is compact
// too). Starts from every layer that can take the form and drops, until none
// changes, those that free nothing: dropping one only adds readers, so this
// ends, at the largest such set. In layer order; empty where none pays.
std::vector<LayerId> compact_backward_layers(const Model& model);

// A copy of `model` with Layer::compact_backward set on `layers`.
Model with_compact_backward(const Model& model, const std::vector<LayerId>& layers);

// The same from a plan's layer names (docs/plan-format.md, "compact_backward"):
// fails naming a layer the model lacks or one whose op has no compact form.
Result<Model> with_compact_backward(const Model& model, const std::vector<std::string>& layer_names);

// The names of the layers of `model` that have compact_backward, in layer order.
std::vector<std::string> compact_backward_names(const Model& model);

}  // namespace mplan
