// The .npy reader against hostile headers (docs/robustness.md): a shape of
// 10^12 with no data (bad_alloc before), a shape whose product overflows
// (SIGSEGV before), an empty shape field (std::out_of_range before), a header
// length of 4 GiB. Each is refused with a message naming the file, before
// anything is allocated from the header's figures.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/npy.h"

namespace mplan::rt {
namespace {

// A .npy file: version 1 preamble, `header` padded to 64 bytes, then `data_bytes` zero bytes.
std::string npy_bytes(std::string header, size_t data_bytes, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t length = static_cast<uint32_t>(header.size());
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>((length >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((length >> 16) & 0xff);
    out += static_cast<char>((length >> 24) & 0xff);
  }
  return out + header + std::string(data_bytes, '\0');
}

std::string dict(const std::string& shape, const std::string& descr = "'<f4'") {
  return "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
}

// Parses `bytes` in memory and from a file; both must agree. Returns the error ("" if read).
std::string read_both(const std::string& bytes, NpyArray* array = nullptr) {
  NpyArray memory, file;
  std::string memory_error, file_error;
  const bool memory_ok =
      npy_parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem.npy", &memory, &memory_error);
  // One file per process: ctest runs these tests in parallel, and a shared name raced.
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("mplan_npy_hostile_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const std::string path = (folder / "mplan_npy_hostile.npy").string();
  std::ofstream(path, std::ios::binary) << bytes;
  const bool file_ok = npy_read(path, &file, &file_error);
  std::filesystem::remove_all(folder);
  EXPECT_EQ(memory_ok, file_ok) << memory_error << " | " << file_error;
  if (!file_ok) {
    EXPECT_NE(file_error.find("mplan_npy_hostile.npy"), std::string::npos) << file_error;
  }
  if (array != nullptr) *array = file;
  return file_ok ? std::string() : file_error;
}

TEST(NpyHostile, AGoodFileReads) {
  NpyArray a;
  EXPECT_EQ(read_both(npy_bytes(dict("(2, 3)"), 24), &a), "");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_both(npy_bytes(dict("(5,)", "'<i4'"), 20), &a), "");
  EXPECT_EQ(a.elements(), 5);
  EXPECT_EQ(read_both(npy_bytes(dict("()"), 4), &a), "");  // a scalar
  EXPECT_EQ(a.elements(), 1);
  EXPECT_EQ(read_both(npy_bytes(dict("(3,)"), 12, 2), &a), "");  // version 2
}

TEST(NpyHostile, AShapeFarLargerThanTheFileIsRefusedBeforeAllocating) {
  const std::string e = read_both(npy_bytes(dict("(1000000, 1000000)"), 0));
  EXPECT_NE(e.find("data ends early"), std::string::npos) << e;
  EXPECT_NE(e.find("1000000000000 elements"), std::string::npos) << e;
}

TEST(NpyHostile, AShapeWhoseProductOverflowsIsRefused) {
  std::string e = read_both(npy_bytes(dict("(4294967296, 4294967296, 16)"), 0));
  EXPECT_NE(e.find("too many elements"), std::string::npos) << e;
  e = read_both(npy_bytes(dict("(99999999999999999999999,)"), 0));
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  e = read_both(npy_bytes(dict("(-1,)"), 0));
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
}

TEST(NpyHostile, MalformedShapesAreRefused) {
  for (const std::string shape : {"", "(", "(,)", "(2,,3)", "(2 3)", "(a,)", "(2.5,)", "[2, 3]", "(1,2"}) {
    SCOPED_TRACE("shape '" + shape + "'");
    const std::string e = read_both(npy_bytes(dict(shape), 0));
    EXPECT_FALSE(e.empty());
  }
}

TEST(NpyHostile, HeaderAndDataSizesAreChecked) {
  // A header claiming 4 GiB (version 2): refused without allocating it.
  std::string bytes = npy_bytes(dict("(1,)"), 4, 2);
  bytes[8] = bytes[9] = bytes[10] = bytes[11] = '\xff';
  std::string e = read_both(bytes);
  EXPECT_NE(e.find("header claims"), std::string::npos) << e;
  // Data after the array: the file is not what its header says.
  e = read_both(npy_bytes(dict("(2,)"), 12));
  EXPECT_NE(e.find("after the data"), std::string::npos) << e;
  // Too short to be anything.
  e = read_both("\x93NUM");
  EXPECT_NE(e.find("not a .npy file"), std::string::npos) << e;
  e = read_both(npy_bytes(dict("(2,)", "'<f8'"), 16));
  EXPECT_NE(e.find("'<f8'"), std::string::npos) << e;
  e = read_both(npy_bytes("{'descr': '<f4', 'shape': (2,), }", 8));
  EXPECT_NE(e.find("lacks"), std::string::npos) << e;
}

}  // namespace
}  // namespace mplan::rt
