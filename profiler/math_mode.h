#pragma once
// The arithmetic a GPU does convolutions and GEMMs in (docs/cost-model.md,
// "Math modes"); the math mode says which units multiply the tensors:
//   fp32: FP32 cores (CUDNN_FMA_MATH, CUBLAS_DEFAULT_MATH with TF32 disabled);
//   tf32: tensor cores with TF32 inputs and FP32 accumulation (Ampere and
//         later; cuDNN's CUDNN_DEFAULT_MATH on FP32 data, PyTorch's default
//         for convolutions);
//   fp16, bf16: tensor cores on 16-bit operands (Volta and later for fp16,
//         Ampere and later for bf16): the math of a model at precision
//         fp16 or bf16 (ops/precision.h), whose tensors are 16-bit too.

#include <optional>
#include <string>
#include <string_view>

namespace mplan {

enum class MathMode { fp32, tf32, fp16, bf16 };

const char* math_mode_name(MathMode mode);  // "fp32", "tf32", ...
std::optional<MathMode> parse_math_mode(std::string_view name);

// Bytes of one operand element a kernel in this mode reads and writes
// (4, or 2 for fp16/bf16).
double math_operand_bytes(MathMode mode);

}  // namespace mplan
