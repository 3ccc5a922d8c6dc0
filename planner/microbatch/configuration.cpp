#include "planner/microbatch/configuration.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "core/bytes.h"

namespace mplan::microbatch {

double Configuration::time_ms() const {
  double total_ms = 0;
  for (const MicroConfiguration& m : micro) total_ms += m.time_ms;
  return total_ms;
}

int64_t Configuration::workspace_bytes() const {
  int64_t max_bytes = 0;
  for (const MicroConfiguration& m : micro) max_bytes = std::max(max_bytes, m.workspace_bytes);
  return max_bytes;
}

int64_t Configuration::batch() const {
  int64_t total = 0;
  for (const MicroConfiguration& m : micro) total += m.micro_batch;
  return total;
}

std::string Configuration::to_string() const {
  std::string parts;
  for (size_t i = 0; i < micro.size(); ++i) {
    if (i > 0) parts += ", ";
    parts += fmt::format("{}x{}", micro[i].micro_batch, micro[i].algorithm);
  }
  return fmt::format("[{}] {:.4g} ms, {}", parts, time_ms(), format_bytes(workspace_bytes()));
}

Configuration concat(const Configuration& first, const Configuration& second) {
  Configuration both = first;
  both.micro.insert(both.micro.end(), second.micro.begin(), second.micro.end());
  return both;
}

void canonicalize(Configuration& configuration) {
  std::stable_sort(configuration.micro.begin(), configuration.micro.end(),
                   [](const MicroConfiguration& a, const MicroConfiguration& b) {
                     return std::tie(b.micro_batch, a.algorithm) < std::tie(a.micro_batch, b.algorithm);
                   });
}

}  // namespace mplan::microbatch
