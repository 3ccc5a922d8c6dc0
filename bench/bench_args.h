#pragma once
// What the benchmarks' command lines share (bench/*_bench.cpp).

#include <sstream>
#include <string>
#include <vector>

namespace mplan::bench {

// "a,b,,c" -> {"a", "b", "c"}: a --models or --fractions list, empty items dropped.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace mplan::bench
