#pragma once
// Reading a layer's op and fields with the op table (ops/op_table.h;
// docs/model-format.md, "Ops") (frontend-internal).

#include <optional>
#include <string_view>

#include "ops/model.h"
#include "core/yaml_reader.h"

namespace mplan {

// "conv" -> Op::conv; nullopt for a name that is not an op.
std::optional<Op> op_from_name(std::string_view name);

// "conv, linear, relu, ...": every op, for messages.
std::string all_op_names();

// Reads the op's own fields (not name, op, in: the caller handles those) into
// a Layer with the format's defaults, failing on unknown fields and on values
// out of range at the offending node.
Layer read_op_fields(const MapReader& entry, Op op);

}  // namespace mplan
