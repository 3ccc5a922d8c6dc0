#pragma once
// Sanitising names from the model (layer names are free text in YAML: quotes,
// "*/", newlines, path separators) before they reach generated code or file
// names. Every function here is total: any input gives a safe output.

#include <string>

namespace mplan::codegen {

// A C++ identifier made of [A-Za-z0-9_], not starting with a digit, never
// empty, never a reserved form (no leading underscore, no "__"):
// "conv1" -> "conv1", "a/b\"c" -> "a_b_c", "3x3" -> "n3x3".
std::string sanitise_identifier(const std::string& name);

// A file name made of [A-Za-z0-9._-], never empty, never "." or "..", never
// starting with '.' or '-' (no hidden files, no options): "../x\ny" -> "x_y".
std::string sanitise_file_name(const std::string& name);

// Text safe inside a // comment on one line: newlines and other control
// characters become spaces, and the result is cut at `max_chars`.
std::string comment_text(const std::string& text, size_t max_chars = 120);

// A C++ string literal (with the quotes) holding `text` exactly: quotes,
// backslashes, control and non-ASCII bytes are escaped as octal, and "??"
// trigraph-like runs are split, so any bytes survive.
std::string cpp_string_literal(const std::string& text);

}  // namespace mplan::codegen
