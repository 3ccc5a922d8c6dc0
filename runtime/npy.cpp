#include "runtime/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mplan::rt {

int64_t NpyArray::elements() const {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
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

bool write_npy(const std::string& path, const char* descr, const void* data,
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
            std::fwrite(data, 4, static_cast<size_t>(count), file) == static_cast<size_t>(count);
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

bool npy_read(const std::string& path, NpyArray* array, std::string* error) {
  if (!is_little_endian_host()) return fail(error, path, "reading .npy needs a little-endian host");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(error, path, "cannot open for reading");
  unsigned char preamble[8];
  if (!in.read(reinterpret_cast<char*>(preamble), 8) || std::memcmp(preamble, "\x93NUMPY", 6) != 0)
    return fail(error, path, "not a .npy file (expected the magic \\x93NUMPY)");
  const int major = preamble[6];
  uint32_t header_length = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!in.read(reinterpret_cast<char*>(len), 2)) return fail(error, path, "truncated header");
    header_length = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char*>(len), 4)) return fail(error, path, "truncated header");
    header_length = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  } else {
    return fail(error, path, "unsupported .npy version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  std::string header(header_length, '\0');
  if (!in.read(header.data(), header_length)) return fail(error, path, "truncated header");

  std::string descr, fortran, shape_text;
  if (!header_value(header, "descr", &descr) || !header_value(header, "fortran_order", &fortran) ||
      !header_value(header, "shape", &shape_text))
    return fail(error, path, "header lacks descr, fortran_order or shape");
  if (descr == "'<f4'") {
    array->type = NpyType::f32;
  } else if (descr == "'<i4'") {
    array->type = NpyType::i32;
  } else {
    return fail(error, path, "dtype " + descr + " is not supported (expected '<f4' or '<i4')");
  }
  if (fortran != "False") return fail(error, path, "Fortran order is not supported (expected C order)");
  array->shape.clear();
  std::string dims = shape_text.substr(1, shape_text.size() - 2);  // strip ( )
  std::stringstream stream(dims);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    try {
      int64_t d = std::stoll(item.substr(first));
      if (d < 0) return fail(error, path, "negative dimension in shape " + shape_text);
      array->shape.push_back(d);
    } catch (...) {
      return fail(error, path, "bad shape " + shape_text);
    }
  }
  const int64_t count = array->elements();
  array->bytes.resize(static_cast<size_t>(count) * 4);
  if (!in.read(reinterpret_cast<char*>(array->bytes.data()), static_cast<std::streamsize>(array->bytes.size())))
    return fail(error, path, "data ends early: expected " + std::to_string(count) + " elements of shape " + shape_text);
  return true;
}

bool npy_write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape,
                   std::string* error) {
  return write_npy(path, "<f4", data, shape, error);
}

bool npy_write_i32(const std::string& path, const int32_t* data,
                   const std::vector<int64_t>& shape, std::string* error) {
  return write_npy(path, "<i4", data, shape, error);
}

}  // namespace mplan::rt
