#include "core/error.h"

#include <fmt/format.h>

namespace mplan {

std::string Error::to_string() const {
  std::string prefix;
  if (!where.file.empty()) prefix = where.file;
  if (where.line > 0) {
    prefix += fmt::format("{}{}", prefix.empty() ? "line " : ":", where.line);
    if (where.column > 0) prefix += fmt::format(":{}", where.column);
  }
  return prefix.empty() ? message : prefix + ": " + message;
}

void check_failed(const char* condition, const char* file, int line,
                  const std::string& message) {
  std::fprintf(stderr, "%s:%d: internal error: %s (%s)\n", file, line,
               message.c_str(), condition);
  std::abort();
}

}  // namespace mplan
