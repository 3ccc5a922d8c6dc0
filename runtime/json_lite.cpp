#include "runtime/json_lite.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mplan::rt::json {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  bool document(Value* out, std::string* error) {
    skip_space();
    if (!value(out, 0)) return report(error);
    skip_space();
    if (at_ < text_.size()) {
      why_ = "unexpected text after the document";
      return report(error);
    }
    return true;
  }

 private:
  bool report(std::string* error) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    if (error) *error = "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + why_;
    return false;
  }
  bool fail(const std::string& why) {
    why_ = why;
    return false;
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }
  bool literal(const char* word) {
    size_t n = 0;
    while (word[n] != '\0') ++n;
    if (text_.compare(at_, n, word) != 0) return false;
    at_ += n;
    return true;
  }

  bool value(Value* out, int depth) {
    if (depth > kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (at_ >= text_.size()) return fail("the document ends where a value was expected");
    const char c = text_[at_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Value::Type::string;
      return string(&out->text);
    }
    if (literal("true")) {
      out->type = Value::Type::boolean;
      out->boolean = true;
      return true;
    }
    if (literal("false")) {
      out->type = Value::Type::boolean;
      return true;
    }
    if (literal("null")) {
      out->type = Value::Type::null;
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool number(Value* out) {
    const size_t start = at_;
    if (text_[at_] == '-') ++at_;
    auto digits = [&] {
      const size_t from = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ > from;
    };
    if (!digits()) return fail("a number needs digits");
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (!digits()) return fail("a number needs digits after '.'");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (!digits()) return fail("a number needs digits in its exponent");
    }
    out->type = Value::Type::number;
    out->text = text_.substr(start, at_ - start);
    return true;
  }

  bool string(std::string* out) {
    ++at_;  // the opening quote
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("a control character inside a string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (at_ >= text_.size()) break;
      const char e = text_[at_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (at_ + 4 > text_.size()) return fail("a \\u escape needs four hex digits");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = text_[at_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= h - '0';
            else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
            else return fail("a \\u escape needs four hex digits");
          }
          // UTF-8 of a code point of the basic plane (surrogates kept as they are).
          if (code < 0x80) {
            out->push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out->push_back(static_cast<char>(0xc0 | (code >> 6)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
          } else {
            out->push_back(static_cast<char>(0xe0 | (code >> 12)));
            out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
          }
          break;
        }
        default: return fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    return fail("the document ends inside a string");
  }

  bool array(Value* out, int depth) {
    out->type = Value::Type::array;
    ++at_;
    skip_space();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      return true;
    }
    for (;;) {
      out->array.emplace_back();
      skip_space();
      if (!value(&out->array.back(), depth + 1)) return false;
      skip_space();
      if (at_ >= text_.size()) return fail("the document ends inside an array");
      if (text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (text_[at_] == ']') {
        ++at_;
        return true;
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  bool object(Value* out, int depth) {
    out->type = Value::Type::object;
    ++at_;
    skip_space();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      return true;
    }
    for (;;) {
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '"') return fail("expected a member name in quotes");
      std::string key;
      if (!string(&key)) return false;
      for (const auto& member : out->object)
        if (member.first == key) return fail("the member '" + key + "' is given twice");
      skip_space();
      if (at_ >= text_.size() || text_[at_] != ':') return fail("expected ':' after a member name");
      ++at_;
      skip_space();
      out->object.emplace_back(std::move(key), Value{});
      if (!value(&out->object.back().second, depth + 1)) return false;
      skip_space();
      if (at_ >= text_.size()) return fail("the document ends inside an object");
      if (text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (text_[at_] == '}') {
        ++at_;
        return true;
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  const std::string& text_;
  size_t at_ = 0;
  std::string why_;
};

}  // namespace

Value::Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

const Value* Value::find(const std::string& key) const {
  for (const auto& member : object)
    if (member.first == key) return &member.second;
  return nullptr;
}

bool Value::as_int(int64_t* out) const {
  if (type != Type::number || text.find_first_of(".eE") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

bool Value::as_double(double* out) const {
  if (type != Type::number) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse(const std::string& text, Value* out, std::string* error) {
  *out = Value{};
  return Parser(text).document(out, error);
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

}  // namespace mplan::rt::json
