// Integer expressions of the model format (core/expression.h).
#include "core/expression.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

int64_t eval(const std::string& text, const ExpressionParams& params = {}) {
  Result<int64_t> r = evaluate_expression(text, params);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -999999;
}

std::string error_of(const std::string& text, const ExpressionParams& params = {}) {
  Result<int64_t> r = evaluate_expression(text, params);
  EXPECT_FALSE(r.ok()) << text << " evaluated to " << (r.ok() ? *r : 0);
  return r.ok() ? "" : r.error().message;
}

TEST(Expression, NumbersAndPrecedence) {
  EXPECT_EQ(eval("64"), 64);
  EXPECT_EQ(eval(" 2 + 3 * 4 "), 14);
  EXPECT_EQ(eval("(2 + 3) * 4"), 20);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);  // left associative
  EXPECT_EQ(eval("64 / 4 / 2"), 8);
  EXPECT_EQ(eval("-3 + 5"), 2);
  EXPECT_EQ(eval("-(2 * 3)"), -6);
  EXPECT_EQ(eval("+7"), 7);
}

TEST(Expression, FloorDivision) {
  EXPECT_EQ(eval("7 / 2"), 3);
  EXPECT_EQ(eval("-7 / 2"), -4);  // floor, as Python's //
  EXPECT_EQ(eval("7 / -2"), -4);
  EXPECT_EQ(eval("-8 / 2"), -4);
}

TEST(Expression, Parameters) {
  ExpressionParams p{{"width", 64}, {"expansion", 4}, {"c", 5}, {"index", 2}};
  EXPECT_EQ(eval("$width", p), 64);
  EXPECT_EQ(eval("$width * $expansion", p), 256);
  EXPECT_EQ(eval("($c + 1) / 2", p), 3);
  EXPECT_EQ(eval("$width*($index+1)", p), 192);
}

TEST(Expression, Errors) {
  EXPECT_NE(error_of("$widht", {{"width", 1}}).find("unknown parameter '$widht'"), std::string::npos);
  EXPECT_NE(error_of("$x").find("no parameters are defined here"), std::string::npos);
  EXPECT_NE(error_of("4 / (2 - 2)").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("9223372036854775807 + 1").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("4611686018427387904 * 4").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("99999999999999999999").find("too large"), std::string::npos);
  EXPECT_NE(error_of("(1 + 2").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("1 +").find("expression ends"), std::string::npos);
  EXPECT_NE(error_of("abc").find("unexpected 'a'"), std::string::npos);
  EXPECT_NE(error_of("2.5").find("unexpected '.'"), std::string::npos);
  EXPECT_NE(error_of("").find("expression ends"), std::string::npos);
  EXPECT_NE(error_of("$").find("parameter name after '$'"), std::string::npos);
  EXPECT_NE(error_of(std::string(10000, '(') + "1").find("too deep"), std::string::npos);
  EXPECT_NE(error_of(std::string(10000, '-') + "1").find("too deep"), std::string::npos);
}

}  // namespace
}  // namespace mplan
