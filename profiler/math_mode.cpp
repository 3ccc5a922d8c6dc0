#include "profiler/math_mode.h"

namespace mplan {

const char* math_mode_name(MathMode mode) {
  switch (mode) {
    case MathMode::fp32: return "fp32";
    case MathMode::tf32: return "tf32";
    case MathMode::fp16: return "fp16";
    case MathMode::bf16: return "bf16";
  }
  return "?";
}

std::optional<MathMode> parse_math_mode(std::string_view name) {
  for (MathMode mode : {MathMode::fp32, MathMode::tf32, MathMode::fp16, MathMode::bf16})
    if (name == math_mode_name(mode)) return mode;
  return std::nullopt;
}

double math_operand_bytes(MathMode mode) {
  return mode == MathMode::fp16 || mode == MathMode::bf16 ? 2.0 : 4.0;
}

}  // namespace mplan
