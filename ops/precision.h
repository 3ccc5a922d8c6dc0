#pragma once
// The precision of a model's tensors (docs/model-format.md, `precision`) and
// the storage type of each data block (docs/tdfg.md, "Data types"). 16-bit
// precision follows PyTorch autocast: convolutions, linear layers, matrix
// products and attention run in 16 bits; batch-norm statistics, softmax,
// layer norm and the loss in fp32; element-wise ops in their inputs' type.
// Master weights, their gradients and the optimizer state stay fp32.

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/ops_casts.h"

namespace mplan {

enum class Precision {
  fp32,  // fp32 tensors; convolutions and GEMMs in the model's `math`
  tf32,  // fp32 tensors; convolutions and GEMMs on tensor cores with TF32 inputs
  bf16,  // autocast to bfloat16 (no loss scaling)
  fp16,  // autocast to float16 (with dynamic loss scaling)
};
const char* precision_name(Precision p);  // "fp32", "tf32", "bf16", "fp16"
std::optional<Precision> parse_precision(std::string_view name);
bool is_16_bit(Precision p);

// The storage type of a block's elements.
enum class DataType { float32, bfloat16, float16, int32 };
const char* data_type_name(DataType t);  // "float32", "bfloat16", "float16", "int32"
std::optional<DataType> parse_data_type(std::string_view name);
int64_t element_bytes(DataType t);
// The type autocast's 16-bit ops compute in: bfloat16, float16, or float32 for fp32 and tf32.
DataType low_precision_type(Precision p);
// The wider of two types (PyTorch's promotion of float types: float32 wins;
// bfloat16 with float16 gives float32).
DataType wider_type(DataType a, DataType b);
// The runtime's name of a float type (the casts' argument, runtime/ops_casts.h).
// Aborts for int32, which no cast takes.
rt::StorageType storage_type(DataType t);

// How an op's output type follows autocast (the op table's OpSpec::autocast).
enum class Autocast {
  follow_inputs,             // the widest of its inputs' types (element-wise ops, pooling, batch norm)
  follow_inputs_and_weight,  // ... and of its fp32 parameter (x + pos_embed, x * layer scale)
  low_precision,             // the 16-bit type (convolution, linear, matmul, attention, patch embedding)
  float32,                   // always fp32 (softmax, layer norm, the loss)
};

}  // namespace mplan
