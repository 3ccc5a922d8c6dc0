#include "codegen/names.h"

#include <cstdio>

namespace mplan::codegen {
namespace {

bool is_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Replaces every run of characters outside `keep` with one '_' and trims '_' at both ends.
template <typename Keep>
std::string squeeze(const std::string& name, Keep keep) {
  std::string out;
  bool pending = false;
  for (unsigned char c : name) {
    if (keep(c)) {
      if (pending && !out.empty()) out += '_';
      pending = false;
      out += static_cast<char>(c);
    } else {
      pending = true;
    }
  }
  return out;
}

}  // namespace

std::string sanitise_identifier(const std::string& name) {
  std::string out = squeeze(name, [](unsigned char c) { return is_alnum(c); });
  if (out.empty()) return "unnamed";
  if (out[0] >= '0' && out[0] <= '9') out = "n" + out;
  return out;
}

std::string sanitise_file_name(const std::string& name) {
  // Runs of letters and digits, joined by '.' or '-' where exactly that one
  // character separates them in the name, else by '_'; nothing before the
  // first run or after the last (no hidden files, no "..", no options).
  std::string out, separator;
  for (unsigned char c : name) {
    if (is_alnum(c)) {
      if (!out.empty() && !separator.empty()) out += (separator == "." || separator == "-") ? separator : "_";
      separator.clear();
      out += static_cast<char>(c);
    } else if (!out.empty()) {
      separator += static_cast<char>(c);
    }
    if (out.size() > 100) break;
  }
  if (out.size() > 100) out.resize(100);
  if (out.empty()) return "unnamed";
  return out;
}

std::string comment_text(const std::string& text, size_t max_chars) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    // Control characters (newline, carriage return, ...) and non-ASCII bytes (a
    // UTF-8 line separator could end a line for some tools) become spaces; a
    // backslash at the end of a // comment would continue it onto the next line.
    out += (c < 0x20 || c >= 0x7f || c == '\\') ? ' ' : static_cast<char>(c);
  }
  return out;
}

std::string cpp_string_literal(const std::string& text) {
  std::string out = "\"";
  char prev = 0;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '?' && prev == '?') {
      out += "\\?";  // no trigraphs
    } else if (c < 0x20 || c >= 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\%03o", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
    prev = static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace mplan::codegen
