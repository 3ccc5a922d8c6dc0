#include "frontend/yaml_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <set>

#include "frontend/shape_inference.h"

namespace mplan {

SourceLocation location_of(const YAML::Node& node, const std::string& file) {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  if (mark.is_null() || mark.line < 0) return SourceLocation{file, 0, 0};
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return fmt::format("'{}'", node.Scalar());
}

void fail_at(const YAML::Node& node, const std::string& file, std::string message) {
  throw InputError{Error{location_of(node, file), std::move(message)}};
}

MapReader::MapReader(YAML::Node map, const std::string& file, std::string label,
                     const ExpressionParams& params)
    : map_(std::move(map)), file_(file), label_(std::move(label)), params_(params) {}

void MapReader::fail(const YAML::Node& at, std::string_view message) const {
  fail_at(at, file_, label_.empty() ? std::string(message) : fmt::format("{}: {}", label_, message));
}

void MapReader::check_keys(std::initializer_list<std::string_view> allowed,
                           std::string_view what) const {
  check_keys(std::vector<std::string_view>(allowed), what);
}

void MapReader::check_keys(const std::vector<std::string_view>& allowed, std::string_view what) const {
  std::set<std::string> seen;
  for (const auto& entry : map_) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) fail(key, fmt::format("expected a field name, got {}", describe_node(key)));
    const std::string& name = key.Scalar();
    if (!seen.insert(name).second) fail(key, fmt::format("'{}' is given twice", name));
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known)
      fail(key, fmt::format("unknown field '{}' in a {} (expected one of: {})", name, what,
                            fmt::join(allowed, ", ")));
  }
}

bool MapReader::has(std::string_view key) const {
  for (const auto& entry : map_)
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return true;
  return false;
}

YAML::Node MapReader::get(std::string_view key) const {
  for (const auto& entry : map_)
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.second;
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node MapReader::required(std::string_view key, std::string_view expected) const {
  if (!has(key)) fail(map_, fmt::format("missing '{}' ({})", key, expected));
  return get(key);
}

int64_t MapReader::int_value(const YAML::Node& value, std::string_view what, int64_t min) const {
  if (!value.IsScalar())
    fail(value, fmt::format("{} must be an integer, got {}", what, describe_node(value)));
  const std::string& text = value.Scalar();
  Result<int64_t> result = evaluate_expression(text, params_);
  if (!result) {
    // Text that is not trying to be an expression gets the simpler message.
    const std::string& why = result.error().message;
    bool looks_like_expression = text.find('$') != std::string::npos ||
                                 why.find("overflow") != std::string::npos ||
                                 why.find("too large") != std::string::npos ||
                                 why.find("division by zero") != std::string::npos;
    if (looks_like_expression) fail(value, fmt::format("{}: {}", what, why));
    fail(value, fmt::format("{} must be an integer (or an integer expression such as "
                            "\"$width * 2\"), got '{}'",
                            what, text));
  }
  int64_t v = *result;
  if (v < min) fail(value, fmt::format("{} must be at least {}, got {}", what, min, v));
  if (v > kMaxSizeField)
    fail(value, fmt::format("{} is {}, larger than the largest accepted ({})", what, v,
                            kMaxSizeField));
  return v;
}

int64_t MapReader::required_int(std::string_view key, int64_t min) const {
  return int_value(required(key, "an integer"), key, min);
}

int64_t MapReader::optional_int(std::string_view key, int64_t fallback, int64_t min) const {
  return has(key) ? int_value(get(key), key, min) : fallback;
}

std::pair<int64_t, int64_t> MapReader::optional_pair(std::string_view key,
                                                     std::pair<int64_t, int64_t> fallback,
                                                     int64_t min) const {
  if (!has(key)) return fallback;
  YAML::Node value = get(key);
  if (value.IsSequence()) {
    if (value.size() != 2)
      fail(value, fmt::format("{} must be an integer or a list [h, w] of two integers, got a "
                              "list of {}",
                              key, value.size()));
    return {int_value(value[0], key, min), int_value(value[1], key, min)};
  }
  int64_t both = int_value(value, key, min);
  return {both, both};
}

std::pair<int64_t, int64_t> MapReader::required_pair(std::string_view key, int64_t min) const {
  required(key, "an integer or [h, w]");
  return optional_pair(key, {0, 0}, min);
}

double MapReader::optional_double(std::string_view key, double fallback) const {
  if (!has(key)) return fallback;
  YAML::Node value = get(key);
  if (!value.IsScalar())
    fail(value, fmt::format("{} must be a number, got {}", key, describe_node(value)));
  const std::string& text = value.Scalar();
  if (text.find('$') != std::string::npos) {
    Result<int64_t> result = evaluate_expression(text, params_);
    if (!result) fail(value, fmt::format("{}: {}", key, result.error().message));
    return static_cast<double>(*result);
  }
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
    fail(value, fmt::format("{} must be a number, got '{}'", key, text));
  return v;
}

bool MapReader::optional_bool(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  YAML::Node value = get(key);
  if (value.IsScalar()) {
    const std::string& text = value.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    if (text.find('$') != std::string::npos) {  // a block parameter: 0 is false
      Result<int64_t> result = evaluate_expression(text, params_);
      if (!result) fail(value, fmt::format("{}: {}", key, result.error().message));
      return *result != 0;
    }
  }
  fail(value, fmt::format("{} must be true or false, got {}", key, describe_node(value)));
}

std::string MapReader::required_string(std::string_view key) const {
  YAML::Node value = required(key, "a name");
  if (!value.IsScalar() || value.Scalar().empty())
    fail(value, fmt::format("{} must be a name, got {}", key, describe_node(value)));
  return value.Scalar();
}

std::string MapReader::optional_string(std::string_view key, std::string fallback) const {
  return has(key) ? required_string(key) : fallback;
}

}  // namespace mplan
