#include "ops/precision.h"

#include "core/error.h"

namespace mplan {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16})
    if (name == precision_name(p)) return p;
  return std::nullopt;
}

bool is_16_bit(Precision p) { return p == Precision::bf16 || p == Precision::fp16; }

const char* data_type_name(DataType t) {
  switch (t) {
    case DataType::float32: return "float32";
    case DataType::bfloat16: return "bfloat16";
    case DataType::float16: return "float16";
    case DataType::int32: return "int32";
  }
  return "?";
}

std::optional<DataType> parse_data_type(std::string_view name) {
  for (DataType t : {DataType::float32, DataType::bfloat16, DataType::float16, DataType::int32})
    if (name == data_type_name(t)) return t;
  return std::nullopt;
}

int64_t element_bytes(DataType t) { return t == DataType::bfloat16 || t == DataType::float16 ? 2 : 4; }

DataType low_precision_type(Precision p) {
  if (p == Precision::bf16) return DataType::bfloat16;
  if (p == Precision::fp16) return DataType::float16;
  return DataType::float32;
}

DataType wider_type(DataType a, DataType b) {
  if (a == b) return a;
  return DataType::float32;
}

rt::StorageType storage_type(DataType t) {
  switch (t) {
    case DataType::float32: return rt::StorageType::float32;
    case DataType::bfloat16: return rt::StorageType::bfloat16;
    case DataType::float16: return rt::StorageType::float16;
    case DataType::int32: break;
  }
  MPLAN_CHECK(false, "storage_type: int32 is not a float type");
  return rt::StorageType::float32;
}

}  // namespace mplan
