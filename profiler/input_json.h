#pragma once
// JSON input files (profile.json, plan.json) parsed strictly:
// nlohmann's parser, plus what it lets through silently or throws past its
// parse_error: a key given twice in one object (nlohmann keeps the last), a
// number beyond a double ("1e999": out_of_range), and nesting deeper than
// any of mplan's formats has (a guard for the readers' own recursion). Every
// problem is an Error with the file and a line and column (syntax) or the
// JSON path ("layers[3].tasks.FP") of the offending value.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"

namespace mplan {

// Objects and arrays nested deeper than this are refused; mplan's formats
// nest at most 5 deep.
inline constexpr int kMaxJsonDepth = 32;

namespace json_input_detail {

// Where the parser is, for messages: one frame per open object or array.
struct Frame {
  bool array = false;
  size_t index = 0;          // arrays: elements completed so far
  std::string key;           // objects: the latest key
  std::set<std::string> keys;
};

inline std::string path_of(const std::vector<Frame>& frames) {
  std::string path;
  for (const Frame& f : frames) {
    if (f.array) {
      path += fmt::format("[{}]", f.index);
    } else if (!f.key.empty()) {
      path += (path.empty() ? "" : ".") + f.key;
    }
  }
  return path.empty() ? std::string("(top level)") : path;
}

struct Refusal {
  std::string message;
};

// nlohmann's DOM builder behind the checks above, as a SAX handler. (Its
// callback parser, used before, scans the enclosing array at the end of every
// object: quadratic, hours for a plan of 2.4 million steps.)
template <typename Json>
class CheckedSax {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  CheckedSax(Json& result, std::vector<Frame>& frames) : dom_(result, /*allow_exceptions=*/true), frames_(frames) {}

  bool null() { return done(dom_.null()); }
  bool boolean(bool v) { return done(dom_.boolean(v)); }
  bool number_integer(number_integer_t v) { return done(dom_.number_integer(v)); }
  bool number_unsigned(number_unsigned_t v) { return done(dom_.number_unsigned(v)); }
  bool number_float(number_float_t v, const string_t& text) { return done(dom_.number_float(v, text)); }
  bool string(string_t& v) { return done(dom_.string(v)); }
  bool binary(binary_t& v) { return done(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    open(false);
    return dom_.start_object(n);
  }
  bool start_array(std::size_t n) {
    open(true);
    return dom_.start_array(n);
  }
  bool key(string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(f.key).second)
      throw Refusal{fmt::format("{}: the key \"{}\" is given twice in one object", path_of(frames_), f.key)};
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return done(dom_.end_object());
  }
  bool end_array() {
    frames_.pop_back();
    return done(dom_.end_array());
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& ex) {
    return dom_.parse_error(position, last_token, ex);  // throws ex
  }

 private:
  void open(bool array) {
    if (static_cast<int>(frames_.size()) >= kMaxJsonDepth)
      throw Refusal{fmt::format("{}: objects and arrays nested more than {} deep", path_of(frames_), kMaxJsonDepth)};
    frames_.push_back(Frame{array, 0, {}, {}});
  }
  // A value (or a closed object or array) completes an element of the enclosing array.
  bool done(bool ok) {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return ok;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<Frame>& frames_;
};

}  // namespace json_input_detail

// Parses `text` (named `file` in messages) as one JSON document of type Json
// (nlohmann::json or nlohmann::ordered_json).
template <typename Json>
Result<Json> parse_input_json(const std::string& text, const std::string& file) {
  using namespace json_input_detail;
  if (Status utf8 = check_utf8(text, file); !utf8) return utf8.error();
  std::vector<Frame> frames;
  try {
    Json result;
    CheckedSax<Json> sax(result, frames);
    Json::sax_parse(text, &sax);
    return result;
  } catch (const Refusal& refusal) {
    return Error{SourceLocation{file, 0, 0}, refusal.message};
  } catch (const typename Json::parse_error& e) {
    // e.byte is 1-based: the byte after the last one read.
    const size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      return Error{SourceLocation{file, 1, 1}, "not valid JSON: the file is empty"};
    if (e.byte >= text.size())
      return Error{location_of_offset(text, at, file),
                   "not valid JSON: the file is truncated (it ends before the document does)"};
    std::string what = e.what();
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error ..."
    const size_t colon = what.find(": ", what.find("parse error"));
    return Error{location_of_offset(text, at, file),
                 "not valid JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2))};
  } catch (const typename Json::out_of_range& e) {
    // "number overflow parsing '1e999'": nlohmann reports it as out_of_range.
    std::string what = e.what();
    const size_t close = what.find("] ");
    return Error{SourceLocation{file, 0, 0},
                 fmt::format("{}: {} (a number beyond the range of a double)", path_of(frames),
                             close == std::string::npos ? what : what.substr(close + 2))};
  } catch (const typename Json::exception& e) {
    return Error{SourceLocation{file, 0, 0}, fmt::format("{}: not valid JSON: {}", path_of(frames), e.what())};
  }
}

}  // namespace mplan
