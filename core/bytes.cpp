#include "core/bytes.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <utility>

namespace mplan {

Result<int64_t> parse_bytes(std::string_view text) {
  const std::string original(text);
  auto fail = [&](const std::string& why) {
    return Error{{}, fmt::format("invalid size '{}': {} (expected a number and a unit "
                                 "such as 512MiB, 8GiB or 12GB)", original, why)};
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) return fail("it is empty");
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  // An exponent, as in 1e3 or 1.5E+2 (only where digits follow the 'e').
  if (i > 0 && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    if (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      i = j;
    }
  }
  if (i == 0) return text[0] == '-' ? fail("sizes cannot be negative") : fail("it does not start with a number");
  std::string number(text.substr(0, i));
  std::string_view unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.remove_prefix(1);
  std::string lower;
  for (char c : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::array<std::pair<const char*, double>, 18> units{{
      {"", 1.0}, {"b", 1.0},
      {"k", 1024.0}, {"kib", 1024.0}, {"m", 1048576.0}, {"mib", 1048576.0},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
      {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"t", 1099511627776.0},
      {"p", 1125899906842624.0}, {"pib", 1125899906842624.0}, {"pb", 1e15}, {"eib", 1152921504606846976.0}}};
  double scale = -1;
  for (const auto& [name, factor] : units)
    if (lower == name) scale = factor;
  if (scale < 0)
    return fail(fmt::format("unknown unit '{}' (units: B, KiB, MiB, GiB, TiB, PiB, EiB; KB, MB, GB, TB, PB)",
                            std::string(unit)));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return fail("the number is malformed");
  double bytes = value * scale;
  // The largest size mplan computes with: int64 bytes, with room for sums.
  if (bytes > 4.0e18) return fail("it is too large (at most 3 EiB)");
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_bytes(int64_t bytes) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = std::fabs(static_cast<double>(bytes));  // -INT64_MIN would overflow
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  const char* sign = bytes < 0 ? "-" : "";
  if (unit == 0) return fmt::format("{}{} B", sign, static_cast<int64_t>(value));
  return fmt::format("{}{:.2f} {}", sign, value, names[unit]);
}

std::string format_bytes_exact(int64_t bytes) {
  return fmt::format("{} ({} B)", format_bytes(bytes), bytes);
}

}  // namespace mplan
