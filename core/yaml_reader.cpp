#include "core/yaml_reader.h"

#include <yaml-cpp/depthguard.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <set>

#include "core/input_file.h"
#include "core/limits.h"

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
  const std::string& text = node.Scalar();
  if (text.size() > 60) return fmt::format("'{}...' ({} characters)", text.substr(0, 60), text.size());
  return fmt::format("'{}'", text);
}

void fail_at(const YAML::Node& node, const std::string& file, std::string message) {
  throw InputError{Error{location_of(node, file), std::move(message)}};
}

namespace {

// Appends the fields of `map` to `fields`, its own first, then those of the
// maps its merge keys name; `depth` bounds merges of merges.
void collect_fields(const YAML::Node& map, const std::string& file, int depth,
                    std::vector<std::pair<YAML::Node, YAML::Node>>& fields) {
  std::vector<YAML::Node> merged;
  for (const auto& entry : map) {
    if (entry.first.IsScalar() && entry.first.Scalar() == "<<") {
      merged.push_back(entry.second);
      continue;
    }
    fields.emplace_back(entry.first, entry.second);
  }
  for (const YAML::Node& value : merged) {
    if (depth >= 16) fail_at(value, file, "merge keys ('<<') nested more than 16 deep");
    std::vector<YAML::Node> maps;
    if (value.IsMap()) {
      maps.push_back(value);
    } else if (value.IsSequence()) {
      for (const YAML::Node& item : value) maps.push_back(item);
    }
    if (maps.empty()) fail_at(value, file, fmt::format("'<<' (a merge key) must name a map or a list of maps, got {}",
                                                       describe_node(value)));
    for (const YAML::Node& m : maps) {
      if (!m.IsMap())
        fail_at(m, file, fmt::format("'<<' (a merge key) must name a map or a list of maps, got {}",
                                     describe_node(m)));
      std::vector<std::pair<YAML::Node, YAML::Node>> more;
      collect_fields(m, file, depth + 1, more);
      for (auto& field : more) {
        // A field the map (or an earlier merged map) gives hides this one.
        bool hidden = false;
        for (const auto& have : fields)
          hidden = hidden || (have.first.IsScalar() && field.first.IsScalar() &&
                              have.first.Scalar() == field.first.Scalar());
        if (!hidden) fields.push_back(std::move(field));
      }
    }
  }
}

// A carriage return not followed by a line feed: a line ending of old Macs.
size_t lone_carriage_return(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')) return i;
  return std::string::npos;
}

// The first line indented with a tab (YAML indents with spaces only), at or
// before line `last_line` (1-based); 0 if none.
int tab_indented_line(const std::string& text, int last_line) {
  int line = 1;
  bool at_start = true;
  for (char c : text) {
    if (line > last_line) break;
    if (c == '\n') {
      ++line;
      at_start = true;
    } else if (at_start && c == '\t') {
      return line;
    } else if (c != ' ') {
      at_start = false;
    }
  }
  return 0;
}

// The line (1-based) of a second YAML document's "---" marker or of content
// after the end marker "...", and which; 0 if neither. A text scan because
// yaml-cpp 0.7's LoadAll loops forever on some bad input (a stray ',':
// jbeder/yaml-cpp#1040), and YAML::Load reads only the first document.
struct TrailingContent {
  int line = 0;
  bool after_end_marker = false;
  int end_marker_line = 0;
};
TrailingContent trailing_content(const std::string& text) {
  TrailingContent found;
  size_t begin = 0;
  bool seen_content = false;
  for (int number = 1; begin <= text.size(); ++number) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    };
    const size_t first = line.find_first_not_of(" \t");
    const bool blank = first == std::string_view::npos || line[first] == '#';
    if (marker("---")) {
      if (seen_content) {
        found.line = number;
        return found;
      }
    } else if (marker("...")) {
      if (seen_content && found.end_marker_line == 0) found.end_marker_line = number;
      const size_t rest = line.find_first_not_of(" \t", 3);
      if (found.end_marker_line != 0 && rest != std::string_view::npos && line[rest] != '#') {
        found.line = number;
        found.after_end_marker = true;
        return found;
      }
    } else if (!blank) {
      if (found.end_marker_line != 0) {
        found.line = number;
        found.after_end_marker = true;
        return found;
      }
      seen_content = true;
    }
    if (end == text.size()) break;
    begin = end + 1;
  }
  return TrailingContent{};
}

}  // namespace

Result<YAML::Node> load_yaml_document(const std::string& text, const std::string& file,
                                      std::string_view expected) {
  if (Status utf8 = check_utf8(text, file); !utf8) return utf8.error();
  if (size_t cr = lone_carriage_return(text); cr != std::string::npos)
    return Error{location_of_offset(text, cr, file),
                 "a line ends with a carriage return alone (old Mac line endings); save the file with LF or CRLF "
                 "line endings"};
  YAML::Node document;
  try {
    document = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    return Error{SourceLocation{file, e.mark.line + 1, e.mark.column + 1},
                 "lists and maps are nested too deeply here (yaml-cpp reads at most 2000 levels)"};
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    if (int tab = tab_indented_line(text, line > 0 ? line : 1 << 30); tab > 0)
      return Error{SourceLocation{file, tab, 1},
                   "a tab indents this line; YAML indents with spaces only"};
    if (e.mark.is_null() || e.mark.line < 0) return Error{SourceLocation{file, 0, 0}, "not valid YAML: " + e.msg};
    return Error{SourceLocation{file, e.mark.line + 1, e.mark.column + 1}, "not valid YAML: " + e.msg};
  }
  if (!document.IsDefined() || document.IsNull())
    return Error{SourceLocation{file, 0, 0}, fmt::format("the file is empty (expected {})", expected)};
  if (TrailingContent t = trailing_content(text); t.line > 0) {
    if (t.after_end_marker)
      return Error{SourceLocation{file, t.line, 1},
                   fmt::format("content after the end of the document (the '...' at line {} ends it); remove "
                               "one or the other",
                               t.end_marker_line)};
    return Error{SourceLocation{file, t.line, 1}, "expected one YAML document, but a second one starts here ('---')"};
  }
  return document;
}

MapReader::MapReader(YAML::Node map, const std::string& file, std::string label,
                     const ExpressionParams& params)
    : map_(std::move(map)), file_(file), label_(std::move(label)), params_(params) {
  if (map_.IsMap()) collect_fields(map_, file_, 0, fields_);
}

void MapReader::fail(const YAML::Node& at, std::string_view message) const {
  fail_at(at, file_, label_.empty() ? std::string(message) : fmt::format("{}: {}", label_, message));
}

void MapReader::check_keys(std::initializer_list<std::string_view> allowed,
                           std::string_view what) const {
  check_keys(std::vector<std::string_view>(allowed), what);
}

void MapReader::check_keys(const std::vector<std::string_view>& allowed, std::string_view what) const {
  std::set<std::string> seen;
  for (const auto& entry : fields_) {
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
  for (const auto& entry : fields_)
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return true;
  return false;
}

YAML::Node MapReader::get(std::string_view key) const {
  for (const auto& entry : fields_)
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
    bool looks_like_expression = text.find_first_of("$()*/+") != std::string::npos ||
                                 why.find("overflow") != std::string::npos ||
                                 why.find("too large") != std::string::npos ||
                                 why.find("nested") != std::string::npos ||
                                 why.find("division by zero") != std::string::npos;
    if (looks_like_expression) fail(value, fmt::format("{}: {}", what, why));
    fail(value, fmt::format("{} must be an integer (or an integer expression such as "
                            "\"$width * 2\"), got {}",
                            what, describe_node(value)));
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
