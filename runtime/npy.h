#pragma once
// .npy files (NumPy format 1.0-3.0) for data, labels, weights and checkpoints:
// float32 ('<f4'), int32 ('<i4') and uint8 ('|u1', images), little-endian, C order.
//
// Reading returns false with a message naming the file and what was expected;
// writing goes to a temporary file renamed over the target, so a crash never
// leaves a half-written checkpoint.

#include <cstdint>
#include <string>
#include <vector>

namespace mplan::rt {

enum class NpyType { f32, i32, u8 };
int64_t npy_element_bytes(NpyType type);
const char* npy_type_name(NpyType type);  // "float32", "int32", "uint8"

struct NpyArray {
  NpyType type = NpyType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // elements() * npy_element_bytes(type) bytes, C order

  int64_t elements() const;
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  const int32_t* i32() const { return reinterpret_cast<const int32_t*>(bytes.data()); }
};

// Reads path into *array. On failure returns false and sets *error, naming
// the file and what is wrong. Hostile files are refused before anything is
// allocated from them (docs/robustness.md): every dimension and their
// product are checked for overflow, and the data the header promises must be
// exactly what the file holds; the header itself is at most kNpyMaxHeaderBytes.
bool npy_read(const std::string& path, NpyArray* array, std::string* error);

// The same over bytes in memory (`name` names them in messages); the reader
// of npy_read, exposed for the fuzzer and tests.
bool npy_parse(const uint8_t* data, size_t size, const std::string& name, NpyArray* array, std::string* error);

// A .npy file's data mapped read-only into memory: a data set larger than
// host memory is paged in from disk as samples are read. The header is
// checked as npy_read checks it.
class NpyMap {
 public:
  NpyMap() = default;
  NpyMap(const NpyMap&) = delete;
  NpyMap& operator=(const NpyMap&) = delete;
  ~NpyMap();
  bool open(const std::string& path, std::string* error);
  NpyType type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const uint8_t* data() const { return data_; }

 private:
  NpyType type_ = NpyType::f32;
  std::vector<int64_t> shape_;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  const uint8_t* data_ = nullptr;
};

// The largest .npy header accepted (numpy writes a few hundred bytes).
inline constexpr uint32_t kNpyMaxHeaderBytes = 1u << 16;
// Writes count = product(shape) elements from data. On failure returns false and
// sets *error.
bool npy_write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape,
                   std::string* error);
bool npy_write_i32(const std::string& path, const int32_t* data,
                   const std::vector<int64_t>& shape, std::string* error);
bool npy_write_u8(const std::string& path, const uint8_t* data, const std::vector<int64_t>& shape,
                  std::string* error);

}  // namespace mplan::rt
