#include "core/expression.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

namespace mplan {
namespace {

// A recursive-descent evaluator over the grammar in expression.h. The first
// error stops evaluation; `error` then holds it and every result is ignored.
class Evaluator {
 public:
  Evaluator(std::string_view text, const ExpressionParams& params) : text_(text), params_(params) {}

  Result<int64_t> run() {
    int64_t value = expr(0);
    skip_space();
    if (!error_ && pos_ < text_.size()) fail(fmt::format("unexpected '{}'", text_[pos_]));
    if (error_) return Error{{}, *error_};
    return value;
  }

 private:
  // Nesting deeper than this is rejected, so that "((((...))))" cannot
  // exhaust the stack.
  static constexpr int kMaxDepth = 200;

  // Messages quote at most this much of the expression.
  static std::string shown_text(std::string_view text) {
    constexpr size_t kShown = 60;
    if (text.size() <= kShown) return std::string(text);
    return fmt::format("{}... ({} characters)", text.substr(0, kShown), text.size());
  }

  void fail(const std::string& why) {
    if (error_) return;
    error_ = fmt::format("{} in expression '{}' at character {}", why, shown_text(text_), pos_ + 1);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  int64_t expr(int depth) {
    int64_t value = term(depth);
    while (!error_) {
      if (accept('+')) {
        int64_t rhs = term(depth);
        if (__builtin_add_overflow(value, rhs, &value)) fail("integer overflow");
      } else if (accept('-')) {
        int64_t rhs = term(depth);
        if (__builtin_sub_overflow(value, rhs, &value)) fail("integer overflow");
      } else {
        break;
      }
    }
    return value;
  }

  int64_t term(int depth) {
    int64_t value = unary(depth);
    while (!error_) {
      if (accept('*')) {
        int64_t rhs = unary(depth);
        if (__builtin_mul_overflow(value, rhs, &value)) fail("integer overflow");
      } else if (accept('/')) {
        size_t at = pos_;
        int64_t rhs = unary(depth);
        if (error_) break;
        if (rhs == 0) {
          pos_ = at;
          fail("division by zero");
        } else if (value == INT64_MIN && rhs == -1) {
          fail("integer overflow");
        } else {
          int64_t quotient = value / rhs;
          // C++ truncates; floor division rounds down when the signs differ.
          if ((value % rhs != 0) && ((value < 0) != (rhs < 0))) --quotient;
          value = quotient;
        }
      } else {
        break;
      }
    }
    return value;
  }

  int64_t unary(int depth) {
    if (depth > kMaxDepth) {
      fail(fmt::format("parentheses and signs nested too deep (more than {} levels)", kMaxDepth));
      return 0;
    }
    if (accept('-')) {
      int64_t value = unary(depth + 1);
      if (value == INT64_MIN) fail("integer overflow");
      return error_ ? 0 : -value;
    }
    if (accept('+')) return unary(depth + 1);
    return primary(depth);
  }

  int64_t primary(int depth) {
    skip_space();
    if (pos_ >= text_.size()) {
      fail("expected a number, a $parameter or '(' but the expression ends");
      return 0;
    }
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      int64_t value = expr(depth + 1);
      if (!error_ && !accept(')')) fail("expected ')'");
      return value;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos_;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      int64_t value = 0;
      auto [ptr, ec] = std::from_chars(text_.data() + pos_, text_.data() + end, value);
      if (ec != std::errc()) {
        fail("number too large for a 64-bit integer");
        return 0;
      }
      pos_ = end;
      return value;
    }
    if (c == '$') {
      ++pos_;
      size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      std::string_view name = text_.substr(pos_, end - pos_);
      if (name.empty()) {
        fail("expected a parameter name after '$'");
        return 0;
      }
      auto it = params_.find(name);
      if (it == params_.end()) {
        std::string known;
        for (const auto& [key, value] : params_) known += (known.empty() ? "$" : ", $") + key;
        fail(fmt::format("unknown parameter '${}' ({})", name,
                         known.empty() ? "no parameters are defined here"
                                       : "defined here: " + known));
        return 0;
      }
      pos_ = end;
      return it->second;
    }
    fail(fmt::format("unexpected '{}' (expected a number, a $parameter or '(')", c));
    return 0;
  }

  std::string_view text_;
  const ExpressionParams& params_;
  size_t pos_ = 0;
  std::optional<std::string> error_;
};

}  // namespace

Result<int64_t> evaluate_expression(std::string_view text, const ExpressionParams& params) {
  return Evaluator(text, params).run();
}

}  // namespace mplan
