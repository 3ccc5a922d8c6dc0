#pragma once
// Reading typed fields out of YAML maps with messages that name the file,
// line and column of the offending node (frontend-internal).
//
// Inside the frontend a bad input throws InputError, caught once at the
// boundary (parse_model), which returns it as an Error: this keeps the many
// field reads readable. Nothing outside the frontend sees the exception.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/expression.h"

namespace mplan {

struct InputError {
  Error error;
};

// yaml-cpp's marks count from 0; ours from 1 (0 = unknown).
SourceLocation location_of(const YAML::Node& node, const std::string& file);

// The one YAML document of a model or device file, after the checks that
// give plain messages where YAML's own would be jargon or silence: the text
// is UTF-8; no line ends with a lone carriage return (old Mac line endings);
// no tab indents a line; nothing follows the end marker `...`; no second
// document starts (`---`); nesting stays within yaml-cpp's depth. An empty
// document is an Error whose message says `expected` ("a model: ...").
Result<YAML::Node> load_yaml_document(const std::string& text, const std::string& file,
                                      std::string_view expected);

// "a list", "a map", "nothing", "'abc'": how messages show what was found.
std::string describe_node(const YAML::Node& node);

// Throws InputError at `node` (or at the whole file when `node` has no mark).
[[noreturn]] void fail_at(const YAML::Node& node, const std::string& file, std::string message);

// A YAML map being read: a model, a layer, a block entry, an optimizer.
// `label` prefixes every message ("layer 'conv1'"; empty for the model's
// top-level fields) and `params` are the values `$name` may use.
class MapReader {
 public:
  MapReader(YAML::Node map, const std::string& file, std::string label,
            const ExpressionParams& params);

  // Merge keys (`<<: *anchor` or `<<: [*a, *b]`, YAML 1.1) are resolved
  // here: the merged maps' fields count as the map's own unless it gives them.
  const YAML::Node& node() const { return map_; }
  const std::string& file() const { return file_; }
  const std::string& label() const { return label_; }
  const ExpressionParams& params() const { return params_; }

  // Fails on a key given twice and on a key not in `allowed`; `what` names the
  // map in the message ("conv layer", "optimizer").
  void check_keys(std::initializer_list<std::string_view> allowed, std::string_view what) const;
  void check_keys(const std::vector<std::string_view>& allowed, std::string_view what) const;

  bool has(std::string_view key) const;
  // The value node of `key`; check has() first.
  YAML::Node get(std::string_view key) const;

  // Integers: a YAML integer or an integer expression (expression.h). Values
  // below `min` or above kMaxSizeField are errors.
  int64_t required_int(std::string_view key, int64_t min) const;
  int64_t optional_int(std::string_view key, int64_t fallback, int64_t min) const;
  // An int or [h, w] (conv and pool windows).
  std::pair<int64_t, int64_t> required_pair(std::string_view key, int64_t min) const;
  std::pair<int64_t, int64_t> optional_pair(std::string_view key, std::pair<int64_t, int64_t> fallback,
                                            int64_t min) const;
  double optional_double(std::string_view key, double fallback) const;
  bool optional_bool(std::string_view key, bool fallback) const;
  std::string required_string(std::string_view key) const;
  std::string optional_string(std::string_view key, std::string fallback) const;

  // Reads any node (not only a field of this map) as an integer >= min.
  int64_t int_value(const YAML::Node& value, std::string_view what, int64_t min) const;

  [[noreturn]] void fail(const YAML::Node& at, std::string_view message) const;

 private:
  YAML::Node required(std::string_view key, std::string_view expected) const;

  // The map's fields, merged ones after its own (a field given by the map or
  // an earlier merged map hides a later one).
  std::vector<std::pair<YAML::Node, YAML::Node>> fields_;
  YAML::Node map_;
  const std::string& file_;
  std::string label_;
  const ExpressionParams& params_;
};

}  // namespace mplan
