#pragma once
// Integer expressions in model files (docs/model-format.md, "Expressions"):
// "$width * $expansion", "($c + 1) / 2", "64". Used for every numeric field
// inside blocks, for `repeat` and for the values given to a block in `with`.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mplan {

// The values an expression may name: a block's parameters and `index`
// (written `$width`, `$index` in the expression).
using ExpressionParams = std::map<std::string, int64_t, std::less<>>;

// Evaluates `text` over `params`. Grammar:
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := ('-' | '+') unary | primary
//   primary := integer | '$' name | '(' expr ')'
// `/` is floor division (rounds towards minus infinity, as Python's //).
// An Error (without a location; the caller knows where the text is) says what
// is wrong: an unknown parameter, division by zero, int64 overflow or a
// syntax error with the offending character.
Result<int64_t> evaluate_expression(std::string_view text, const ExpressionParams& params);

}  // namespace mplan
