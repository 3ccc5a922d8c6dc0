#include "driver/paths.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace mplan::driver {

Status refuse_overwriting_inputs(const std::string& flag, const std::string& output,
                                 const std::vector<std::string>& inputs, bool output_is_folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(fs::absolute(output, ec), ec);
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    std::error_code e1, e2;
    const bool same = fs::exists(output, e1) && fs::exists(input, e2) && fs::equivalent(output, input, e1);
    if (same)
      return Error{{}, fmt::format("{} '{}' is the input file '{}': mplan does not write over what it reads; choose "
                                   "another output",
                                   flag, output, input),
                   ErrorKind::usage};
    if (!output_is_folder) continue;
    // The input inside the output folder (at any depth): replacing the folder would lose it.
    const fs::path in = fs::weakly_canonical(fs::absolute(input, e1), e1);
    const auto mismatch = std::mismatch(out.begin(), out.end(), in.begin(), in.end());
    if (mismatch.first == out.end() && in != out)
      return Error{{}, fmt::format("{} '{}' holds the input file '{}', and mplan replaces the whole folder; keep "
                                   "inputs outside the output folder or choose another one",
                                   flag, output, input),
                   ErrorKind::usage};
  }
  return Ok{};
}

}  // namespace mplan::driver
