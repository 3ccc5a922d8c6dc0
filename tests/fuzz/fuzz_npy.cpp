// Fuzz target: the .npy reader (runtime/npy.h) the generated program uses for
// --data and --load.

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mplan::rt::NpyArray array;
  std::string error;
  if (mplan::rt::npy_parse(data, size, "fuzz.npy", &array, &error)) (void)array.elements();
  return 0;
}
