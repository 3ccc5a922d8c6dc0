#include "frontend/block_expansion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

#include "core/expression.h"
#include "frontend/layer_fields.h"
#include "frontend/shape_inference.h"
#include "core/yaml_reader.h"

namespace mplan {
namespace {

// One entry of `blocks:`.
struct BlockDefinition {
  YAML::Node key;                        // the block's name in the file, for locations
  YAML::Node layers;                     // its layer list, expanded once per repetition
  ExpressionParams defaults;             // every parameter with its default
  std::vector<std::string> param_names;  // in file order, for messages
};

// One layer list being expanded: the top level, or one repetition of one
// block instance.
struct Scope {
  std::string prefix;        // prepended to local names: "" or "layer1.0."
  LayerId input = kModelInput;  // what `input` names here
  ExpressionParams params;   // what `$name` names here
  const Scope* parent = nullptr;  // where the block is used: outer names resolve there
  std::string usage;         // "block 'b' used at line 40, inside block 'a' used at line 7"
  std::vector<std::string> active_blocks;  // blocks being expanded, to reject recursion
  std::set<std::string> local_names;       // every entry name of this list
};

const ExpressionParams kNoParams;

// Layer names are single path components: '.' separates instances from their
// layers, '$' starts an expression.
bool is_valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (c == '.' || c == '$' || std::isspace(static_cast<unsigned char>(c)) || c == ',')
      return false;
  return true;
}

bool is_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

class Expander {
 public:
  Expander(const YAML::Node& blocks, const std::string& file) : file_(file) {
    read_blocks(blocks);
  }

  ExpandedLayers run(const YAML::Node& layers) {
    Scope top;
    expand_list(layers, top, "layers");
    return std::move(result_);
  }

 private:
  void read_blocks(const YAML::Node& blocks) {
    if (!blocks.IsDefined() || blocks.IsNull()) return;
    if (!blocks.IsMap())
      fail_at(blocks, file_,
              fmt::format("blocks must be a map from block name to {{params: ..., layers: [...]}}, "
                          "got {}",
                          describe_node(blocks)));
    for (const auto& entry : blocks) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar() || !is_valid_name(key.Scalar()))
        fail_at(key, file_, fmt::format("expected a block name (without '.', '$' or spaces), got {}",
                                        describe_node(key)));
      const std::string& name = key.Scalar();
      if (definitions_.count(name)) fail_at(key, file_, fmt::format("block '{}' is defined twice", name));
      std::string label = fmt::format("block '{}'", name);
      if (!entry.second.IsMap())
        fail_at(entry.second, file_,
                fmt::format("{}: expected a map {{params: ..., layers: [...]}}, got {}", label,
                            describe_node(entry.second)));
      MapReader reader(entry.second, file_, label, kNoParams);
      reader.check_keys({"params", "layers"}, "block definition");
      if (!reader.has("layers")) reader.fail(reader.node(), "missing 'layers' (a list of layers)");
      const YAML::Node layers = reader.get("layers");
      if (!layers.IsSequence() || layers.size() == 0)
        reader.fail(layers, fmt::format("layers must be a non-empty list, got {}",
                                        describe_node(layers)));
      BlockDefinition definition{key, layers, {}, {}};
      if (reader.has("params")) read_params(reader, definition);
      definitions_.emplace(name, std::move(definition));
    }
  }

  void read_params(const MapReader& reader, BlockDefinition& definition) {
    YAML::Node params = reader.get("params");
    if (params.IsNull()) return;
    if (!params.IsMap())
      reader.fail(params, fmt::format("params must be a map from parameter name to its default "
                                      "integer, got {}",
                                      describe_node(params)));
    for (const auto& entry : params) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar() || !is_identifier(key.Scalar()))
        reader.fail(key, fmt::format("expected a parameter name (letters, digits, _), got {}",
                                     describe_node(key)));
      const std::string& name = key.Scalar();
      if (name == "index")
        reader.fail(key, "'index' is built in (the repetition index $index) and cannot be a parameter");
      if (definition.defaults.count(name))
        reader.fail(key, fmt::format("parameter '{}' is given twice", name));
      definition.defaults[name] =
          reader.int_value(entry.second, fmt::format("parameter '{}'", name), -kMaxSizeField);
      definition.param_names.push_back(name);
    }
  }

  // Names every entry of `list` (given or generated), rejecting duplicates.
  // Generated names are <op>_<n> (or <block>_<n>), n counting the entries of
  // that op in this list so far, this one included.
  std::vector<std::string> name_entries(const YAML::Node& list, Scope& scope) {
    std::vector<std::string> names;
    std::map<std::string, int> count_by_kind;
    std::map<std::string, YAML::Node> node_by_name;
    for (const YAML::Node& entry : list) {
      if (!entry.IsMap())
        fail_at(entry, file_, fmt::format("expected a layer (a map with op: or block:), got {}",
                                          describe_node(entry)));
      MapReader reader(entry, file_, "", scope.params);
      YAML::Node kind_node = reader.has("op") ? reader.get("op") : reader.get("block");
      std::string kind = kind_node.IsDefined() && kind_node.IsScalar() ? kind_node.Scalar() : "layer";
      int n = ++count_by_kind[kind];
      std::string name;
      // Never assign to a YAML::Node: yaml-cpp's operator= overwrites the
      // document node it refers to.
      const YAML::Node at = reader.has("name") ? reader.get("name") : entry;
      if (reader.has("name")) {
        if (!at.IsScalar() || !is_valid_name(at.Scalar()))
          fail_at(at, file_, fmt::format("name must be a name without '.', '$', ',' or spaces, got {}",
                                         describe_node(at)));
        name = at.Scalar();
        if (name == "input")
          fail_at(at, file_, "'input' is reserved (it names the model's or the block's input)");
      } else {
        name = fmt::format("{}_{}", kind, n);
      }
      auto [it, inserted] = node_by_name.emplace(name, entry);
      if (!inserted)
        fail_at(at, file_,
                fmt::format("duplicate layer name '{}{}' (already used by the layer at line {}){}",
                            scope.prefix, name, location_of(it->second, file_).line,
                            reader.has("name") ? "" : "; give this layer a name"));
      names.push_back(name);
    }
    scope.local_names.insert(names.begin(), names.end());
    return names;
  }

  // Expands `list` in `scope`; returns the output of its last entry.
  LayerId expand_list(const YAML::Node& list, Scope& scope, std::string_view what) {
    if (!list.IsSequence() || list.size() == 0)
      fail_at(list, file_, fmt::format("{} must be a non-empty list of layers, got {}", what,
                                       describe_node(list)));
    std::vector<std::string> names = name_entries(list, scope);
    LayerId previous = scope.input;
    for (size_t i = 0; i < list.size(); ++i) {
      YAML::Node entry = list[i];
      bool is_block = MapReader(entry, file_, "", scope.params).has("block");
      previous = is_block ? expand_block_entry(entry, names[i], previous, scope)
                          : expand_op_entry(entry, names[i], previous, scope);
    }
    return previous;
  }

  std::string label_for(const std::string& path, const Scope& scope, const char* noun) const {
    std::string label = fmt::format("{} '{}'", noun, path);
    if (!scope.usage.empty()) label += fmt::format(" ({})", scope.usage);
    return label;
  }

  LayerId expand_op_entry(const YAML::Node& entry, const std::string& local, LayerId previous,
                          Scope& scope) {
    std::string path = scope.prefix + local;
    MapReader reader(entry, file_, label_for(path, scope, "layer"), scope.params);
    if (!reader.has("op"))
      reader.fail(entry, fmt::format("missing 'op' (one of: {}) or 'block' (a block's name)",
                                     all_op_names()));
    std::string op_text = reader.required_string("op");
    std::optional<Op> op = op_from_name(op_text);
    if (!op)
      reader.fail(reader.get("op"),
                  fmt::format("unknown op '{}' (expected one of: {})", op_text, all_op_names()));
    Layer layer = read_op_fields(reader, *op);
    layer.name = path;
    layer.where = location_of(entry, file_);
    layer.inputs = read_inputs(reader, previous, scope, /*single=*/false);
    if (result_.layers.size() >= kMaxLayers)
      reader.fail(entry, fmt::format("the model expands to more than {} layers", kMaxLayers));
    LayerId id = static_cast<LayerId>(result_.layers.size());
    result_.layers.push_back(std::move(layer));
    result_.labels.push_back(reader.label());
    define(path, id, reader, entry);
    return id;
  }

  LayerId expand_block_entry(const YAML::Node& entry, const std::string& local, LayerId previous,
                             Scope& scope) {
    std::string path = scope.prefix + local;
    MapReader reader(entry, file_, label_for(path, scope, "block instance"), scope.params);
    if (reader.has("op")) reader.fail(entry, "a layer has either 'op' or 'block', not both");
    reader.check_keys({"name", "block", "repeat", "with", "in"}, "block instance");
    std::string block = reader.required_string("block");
    auto found = definitions_.find(block);
    if (found == definitions_.end()) {
      std::vector<std::string> known;
      for (const auto& [name, definition] : definitions_) known.push_back(name);
      reader.fail(reader.get("block"),
                  fmt::format("unknown block '{}' ({})", block,
                              known.empty() ? "the file defines no blocks"
                                            : fmt::format("defined: {}", fmt::join(known, ", "))));
    }
    const BlockDefinition& definition = found->second;
    if (std::find(scope.active_blocks.begin(), scope.active_blocks.end(), block) !=
        scope.active_blocks.end())
      reader.fail(reader.get("block"),
                  fmt::format("block '{}' uses itself ({} -> {}); blocks cannot be recursive", block,
                              fmt::join(scope.active_blocks, " -> "), block));
    if (scope.active_blocks.size() >= kMaxBlockNesting)
      reader.fail(reader.get("block"),
                  fmt::format("block instances are nested more than {} deep (block '{}' inside {} -> ...); "
                              "nest fewer blocks",
                              kMaxBlockNesting, block, fmt::join(scope.active_blocks.begin(),
                                                                 scope.active_blocks.begin() + 3, " -> ")));
    int64_t repeat = reader.optional_int("repeat", 1, 1);
    ExpressionParams params = read_with(reader, block, definition);
    LayerId current = read_inputs(reader, previous, scope, /*single=*/true).front();
    int line = location_of(entry, file_).line;
    for (int64_t i = 0; i < repeat; ++i) {
      Scope child;
      child.prefix = repeat > 1 ? fmt::format("{}.{}.", path, i) : path + ".";
      child.input = current;
      child.params = params;
      child.params["index"] = i;
      child.parent = &scope;
      child.usage = fmt::format("block '{}' used at line {}", block, line);
      if (!scope.usage.empty()) {
        // The innermost few uses only: a label per layer must not grow with the nesting depth.
        if (scope.active_blocks.size() < 4) {
          child.usage += ", inside " + scope.usage;
        } else {
          child.usage += ", inside " + scope.usage.substr(0, scope.usage.find(", inside ")) + ", inside ...";
        }
      }
      child.active_blocks = scope.active_blocks;
      child.active_blocks.push_back(block);
      current = expand_list(definition.layers, child, fmt::format("block '{}' layers", block));
      if (repeat > 1) define(fmt::format("{}.{}", path, i), current, reader, entry);
    }
    define(path, current, reader, entry);
    return current;
  }

  // The block's parameters: defaults overridden by `with`, whose values are
  // expressions over the parameters where the block is used.
  ExpressionParams read_with(const MapReader& reader, const std::string& block,
                             const BlockDefinition& definition) {
    ExpressionParams params = definition.defaults;
    if (!reader.has("with")) return params;
    YAML::Node with = reader.get("with");
    if (!with.IsMap())
      reader.fail(with, fmt::format("with must be a map {{parameter: value}}, got {}",
                                    describe_node(with)));
    std::set<std::string> given;
    for (const auto& entry : with) {
      const YAML::Node& key = entry.first;
      std::string name = key.IsScalar() ? key.Scalar() : "";
      if (!definition.defaults.count(name))
        reader.fail(key, fmt::format("block '{}' has no parameter {} ({})", block,
                                     describe_node(key),
                                     definition.param_names.empty()
                                         ? "it has no parameters"
                                         : fmt::format("its parameters: {}",
                                                       fmt::join(definition.param_names, ", "))));
      if (!given.insert(name).second)
        reader.fail(key, fmt::format("parameter '{}' is given twice", name));
      params[name] = reader.int_value(entry.second, fmt::format("with.{}", name), -kMaxSizeField);
    }
    return params;
  }

  // `in:`: one name or a list of names; default the previous entry's output.
  std::vector<LayerId> read_inputs(const MapReader& reader, LayerId previous, const Scope& scope,
                                   bool single) {
    if (!reader.has("in")) return {previous};
    YAML::Node in = reader.get("in");
    std::vector<YAML::Node> names;
    if (in.IsScalar()) {
      names.push_back(in);
    } else if (in.IsSequence() && in.size() > 0) {
      for (const YAML::Node& name : in) names.push_back(name);
    } else {
      reader.fail(in, fmt::format("in must be a layer name or a non-empty list of names, got {}",
                                  describe_node(in)));
    }
    if (single && names.size() != 1)
      reader.fail(in, fmt::format("a block takes one input, got a list of {}", names.size()));
    std::vector<LayerId> inputs;
    for (const YAML::Node& name : names) {
      if (!name.IsScalar())
        reader.fail(name, fmt::format("in: expected a layer name, got {}", describe_node(name)));
      inputs.push_back(resolve(name, reader, scope));
    }
    return inputs;
  }

  // Resolves a name of `in:` (docs/model-format.md, "Names"): `input`, then
  // the entries of this list, then of the lists around it, innermost first.
  // A name of this list that is not defined yet is a later layer: a cycle.
  LayerId resolve(const YAML::Node& at, const MapReader& reader, const Scope& scope) {
    const std::string& name = at.Scalar();
    if (name == "input") return scope.input;
    std::string head = name.substr(0, name.find('.'));
    for (const Scope* s = &scope; s != nullptr; s = s->parent) {
      auto it = outputs_.find(s->prefix + name);
      if (it != outputs_.end()) return it->second;
      if (!s->local_names.count(head)) continue;
      if (outputs_.count(s->prefix + head))
        reader.fail(at, fmt::format("in: unknown layer '{}' ('{}' has no layer or repetition "
                                    "'{}')",
                                    name, s->prefix + head, name.substr(head.size() + 1)));
      reader.fail(at, fmt::format("in: '{}' is not an earlier layer (a layer may only use layers "
                                  "before it; using itself or a later one would be a cycle)",
                                  name));
    }
    reader.fail(at, fmt::format("in: unknown layer '{}' (no earlier layer has this name{})", name,
                                scope.parent ? " in the block or around it" : ""));
  }

  void define(const std::string& path, LayerId output, const MapReader& reader,
              const YAML::Node& at) {
    if (!outputs_.emplace(path, output).second)
      reader.fail(at, fmt::format("duplicate layer name '{}'", path));
  }

  const std::string& file_;
  std::map<std::string, BlockDefinition> definitions_;
  // Every layer path and every instance path ("layer1", "layer1.0") -> its output.
  std::unordered_map<std::string, LayerId> outputs_;
  ExpandedLayers result_;
};

}  // namespace

ExpandedLayers expand_layers(const YAML::Node& blocks, const YAML::Node& layers,
                             const std::string& file) {
  return Expander(blocks, file).run(layers);
}

}  // namespace mplan
