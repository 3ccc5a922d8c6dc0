#include "runtime/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <system_error>
#include <vector>

namespace mplan::rt {

int64_t npy_element_bytes(NpyType type) { return type == NpyType::u8 ? 1 : 4; }

const char* npy_type_name(NpyType type) {
  switch (type) {
    case NpyType::f32: return "float32";
    case NpyType::i32: return "int32";
    case NpyType::u8: return "uint8";
  }
  return "?";
}

int64_t NpyArray::elements() const {
  // The reader bounds the product (at most 2^60); arrays built in code must too.
  int64_t count = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(count, d, &count)) return -1;
  return count;
}

namespace {

bool fail(std::string* error, const std::string& path, const std::string& what) {
  if (error != nullptr) *error = path + ": " + what;
  return false;
}

// The value text after 'key': in a header dict such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
bool header_value(const std::string& header, const std::string& key, std::string* value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  at = header.find(':', at);
  if (at == std::string::npos) return false;
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end;
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos) return false;
    ++end;
  } else {
    end = header.find_first_of(",}", at);
    if (end == std::string::npos) return false;
  }
  *value = header.substr(at, end - at);
  return true;
}

bool is_little_endian_host() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

bool write_npy(const std::string& path, const char* descr, size_t element_bytes, const void* data,
               const std::vector<int64_t>& shape, std::string* error) {
  if (!is_little_endian_host()) return fail(error, path, "writing .npy needs a little-endian host");
  std::string shape_text = "(";
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    count *= shape[i];
  }
  shape_text += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const std::string temp = path + ".tmp";
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) return fail(error, temp, std::string("cannot open for writing: ") + std::strerror(errno));
  const uint16_t length = static_cast<uint16_t>(header.size());
  const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                      static_cast<unsigned char>(length & 0xff),
                                      static_cast<unsigned char>(length >> 8)};
  bool ok = std::fwrite(preamble, 1, 10, file) == 10 &&
            std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
            std::fwrite(data, element_bytes, static_cast<size_t>(count), file) == static_cast<size_t>(count);
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    std::remove(temp.c_str());
    return fail(error, temp, "write failed");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return fail(error, path, std::string("cannot rename temporary file into place: ") + std::strerror(errno));
  }
  return true;
}

}  // namespace

namespace {

// What the header says; the data starts at data_offset.
struct NpyHeader {
  NpyType type = NpyType::f32;
  std::vector<int64_t> shape;
  uint64_t data_bytes = 0;
  uint64_t data_offset = 0;
};

// The shape tuple's text "(2, 3)", "(5,)" or "()": whole numbers only, each
// and their product (times the element's bytes) without overflow.
bool parse_shape(const std::string& text, const std::string& name, NpyType type, std::vector<int64_t>* shape,
                 uint64_t* data_bytes, std::string* error) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return fail(error, name, "the header's shape is not a tuple such as (2, 3): " + text);
  shape->clear();
  uint64_t count = 1;
  size_t i = 1;
  const size_t end = text.size() - 1;
  bool expect_number = true, seen_comma_after_last = false;
  while (i < end) {
    const char c = text[i];
    if (c == ' ') {
      ++i;
      continue;
    }
    if (expect_number && c >= '0' && c <= '9') {
      uint64_t d = 0;
      while (i < end && text[i] >= '0' && text[i] <= '9') {
        if (d > (uint64_t{1} << 62) / 10) return fail(error, name, "a dimension of the shape is too large: " + text);
        d = d * 10 + static_cast<uint64_t>(text[i] - '0');
        ++i;
      }
      if (__builtin_mul_overflow(count, d, &count) || count > (uint64_t{1} << 60))
        return fail(error, name, "the shape " + text + " has too many elements");
      shape->push_back(static_cast<int64_t>(d));
      expect_number = false;
      seen_comma_after_last = false;
      continue;
    }
    if (!expect_number && c == ',') {
      expect_number = true;
      seen_comma_after_last = true;
      ++i;
      continue;
    }
    return fail(error, name, "the header's shape is not a tuple of whole numbers: " + text);
  }
  if (expect_number && !shape->empty() && !seen_comma_after_last)
    return fail(error, name, "the header's shape is malformed: " + text);
  if (shape->size() > 32) return fail(error, name, "the shape " + text + " has more than 32 dimensions");
  *data_bytes = count * static_cast<uint64_t>(npy_element_bytes(type));
  return true;
}

bool parse_header(const uint8_t* data, size_t size, const std::string& name, NpyHeader* out, std::string* error) {
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0)
    return fail(error, name, "not a .npy file (expected the magic \\x93NUMPY)");
  const int major = data[6];
  uint32_t header_length = 0;
  size_t prefix = 0;
  if (major == 1) {
    header_length = data[8] | (data[9] << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return fail(error, name, "truncated header");
    header_length = data[8] | (data[9] << 8) | (data[10] << 16) | (static_cast<uint32_t>(data[11]) << 24);
    prefix = 12;
  } else {
    return fail(error, name, "unsupported .npy version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  if (header_length > kNpyMaxHeaderBytes)
    return fail(error, name, "the header claims " + std::to_string(header_length) + " bytes, more than the " +
                                 std::to_string(kNpyMaxHeaderBytes) + " accepted");
  if (size - prefix < header_length) return fail(error, name, "truncated header");
  const std::string header(reinterpret_cast<const char*>(data + prefix), header_length);
  std::string descr, fortran, shape_text;
  if (!header_value(header, "descr", &descr) || !header_value(header, "fortran_order", &fortran) ||
      !header_value(header, "shape", &shape_text))
    return fail(error, name, "header lacks descr, fortran_order or shape");
  while (!fortran.empty() && fortran.back() == ' ') fortran.pop_back();
  while (!descr.empty() && descr.back() == ' ') descr.pop_back();
  if (descr == "'<f4'") {
    out->type = NpyType::f32;
  } else if (descr == "'<i4'") {
    out->type = NpyType::i32;
  } else if (descr == "'|u1'" || descr == "'<u1'") {
    out->type = NpyType::u8;
  } else {
    return fail(error, name, "dtype " + descr + " is not supported (expected '<f4', '<i4' or '|u1')");
  }
  if (fortran != "False") return fail(error, name, "Fortran order is not supported (expected C order)");
  if (!parse_shape(shape_text, name, out->type, &out->shape, &out->data_bytes, error)) return false;
  out->data_offset = prefix + header_length;
  return true;
}

// The data size the header promises against what the file holds, before
// anything is allocated.
bool check_data_size(const NpyHeader& h, uint64_t file_size, const std::string& name, std::string* error) {
  const uint64_t available = file_size - h.data_offset;
  std::string shape = "(";
  for (size_t i = 0; i < h.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(h.shape[i]);
  shape += ")";
  if (available < h.data_bytes)
    return fail(error, name, "data ends early: expected " +
                                 std::to_string(h.data_bytes / static_cast<uint64_t>(npy_element_bytes(h.type))) +
                                 " elements of shape " +
                                 shape + " (" + std::to_string(h.data_bytes) + " bytes), the file holds " +
                                 std::to_string(available) + " bytes of data");
  if (available > h.data_bytes)
    return fail(error, name, "the file has " + std::to_string(available - h.data_bytes) +
                                 " bytes after the data of shape " + shape);
  return true;
}

}  // namespace

bool npy_parse(const uint8_t* data, size_t size, const std::string& name, NpyArray* array, std::string* error) {
  if (!is_little_endian_host()) return fail(error, name, "reading .npy needs a little-endian host");
  NpyHeader h;
  if (!parse_header(data, size, name, &h, error)) return false;
  if (!check_data_size(h, size, name, error)) return false;
  array->type = h.type;
  array->shape = h.shape;
  array->bytes.assign(data + h.data_offset, data + h.data_offset + h.data_bytes);
  return true;
}

bool npy_read(const std::string& path, NpyArray* array, std::string* error) {
  if (!is_little_endian_host()) return fail(error, path, "reading .npy needs a little-endian host");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(error, path, "cannot open for reading");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fail(error, path, "not a regular file");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return fail(error, path, "cannot read its size: " + ec.message());
  // The header first: at most its prefix and kNpyMaxHeaderBytes.
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(file_size, 12 + kNpyMaxHeaderBytes)));
  if (!in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size())))
    return fail(error, path, "truncated header");
  NpyHeader h;
  if (!parse_header(head.data(), head.size(), path, &h, error)) return false;
  if (!check_data_size(h, file_size, path, error)) return false;
  in.clear();
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  array->type = h.type;
  array->shape = h.shape;
  array->bytes.resize(static_cast<size_t>(h.data_bytes));
  if (!in.read(reinterpret_cast<char*>(array->bytes.data()), static_cast<std::streamsize>(array->bytes.size())))
    return fail(error, path, "data ends early (the file changed while it was read)");
  return true;
}

NpyMap::~NpyMap() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

bool NpyMap::open(const std::string& path, std::string* error) {
  if (!is_little_endian_host()) return fail(error, path, "reading .npy needs a little-endian host");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return fail(error, path, "cannot open for reading: not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(error, path, std::string("cannot open for reading: ") + std::strerror(errno));
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec || file_size == 0) {
    ::close(fd);
    return fail(error, path, ec ? "cannot read its size: " + ec.message() : std::string("empty file"));
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) return fail(error, path, std::string("cannot map into memory: ") + std::strerror(errno));
  const auto* bytes = static_cast<const uint8_t*>(mapping);
  NpyHeader h;
  if (!parse_header(bytes, static_cast<size_t>(file_size), path, &h, error) ||
      !check_data_size(h, file_size, path, error)) {
    ::munmap(mapping, static_cast<size_t>(file_size));
    return false;
  }
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  mapping_ = mapping;
  mapping_bytes_ = static_cast<size_t>(file_size);
  type_ = h.type;
  shape_ = h.shape;
  data_ = bytes + h.data_offset;
  // Samples are read in a shuffled order: no read-ahead beyond what is asked.
  ::madvise(mapping, mapping_bytes_, MADV_RANDOM);
  return true;
}

bool npy_write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape,
                   std::string* error) {
  return write_npy(path, "<f4", 4, data, shape, error);
}

bool npy_write_i32(const std::string& path, const int32_t* data,
                   const std::vector<int64_t>& shape, std::string* error) {
  return write_npy(path, "<i4", 4, data, shape, error);
}

bool npy_write_u8(const std::string& path, const uint8_t* data, const std::vector<int64_t>& shape,
                  std::string* error) {
  return write_npy(path, "|u1", 1, data, shape, error);
}

}  // namespace mplan::rt
