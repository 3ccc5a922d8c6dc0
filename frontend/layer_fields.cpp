#include "frontend/layer_fields.h"

#include <fmt/format.h>

#include "ops/op_table.h"

namespace mplan {

std::optional<Op> op_from_name(std::string_view name) {
  for (const OpSpec* spec : all_op_specs())
    if (name == spec->name) return spec->op;
  return std::nullopt;
}

std::string all_op_names() {
  std::string names;
  for (const OpSpec* spec : all_op_specs()) names += (names.empty() ? "" : ", ") + std::string(spec->name);
  return names;
}

Layer read_op_fields(const MapReader& r, Op op) {
  const OpSpec& spec = op_spec(op);
  std::vector<std::string_view> allowed = {"name", "op", "in"};
  for (const std::string& field : spec.fields) allowed.push_back(field);
  r.check_keys(allowed, fmt::format("{} layer", spec.name));
  Layer layer;
  layer.op = op;
  if (spec.read_fields != nullptr) spec.read_fields(r, layer);
  return layer;
}

}  // namespace mplan
