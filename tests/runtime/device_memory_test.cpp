// The CPU backend's device memory (runtime/device.h): one aligned allocation,
// pinned-host stand-in, fills (zeros and the poison NaN), and the poison checks.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/cpu/stream.h"
#include "runtime/device.h"
#include "runtime/poison.h"

namespace mplan::rt {
namespace {

TEST(DeviceMemory, IsAlignedAndRoundedUp) {
  std::string error;
  DeviceMemory memory = device_alloc(1000, &error);
  ASSERT_NE(memory.base, nullptr) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory.base) % kDeviceAlignmentBytes, 0u);
  EXPECT_EQ(memory.size_bytes, 1024u);
  device_free(memory);
  EXPECT_EQ(memory.base, nullptr);
}

TEST(DeviceMemory, AnImpossibleAllocationIsAnErrorNotACrash) {
  std::string error;
  DeviceMemory memory = device_alloc(std::numeric_limits<size_t>::max() / 2, &error);
  EXPECT_EQ(memory.base, nullptr);
  EXPECT_NE(error.find("cannot allocate"), std::string::npos) << error;
}

TEST(DeviceMemory, FillWritesThePoisonPatternOnlyInItsRange) {
  std::string error;
  DeviceMemory memory = device_alloc(4096, &error);
  float* block = reinterpret_cast<float*>(memory.base + 512);
  float* neighbour = reinterpret_cast<float*>(memory.base + 768);
  for (int i = 0; i < 64; ++i) block[i] = neighbour[i] = 1.5f;
  Stream stream("compute");
  fill_u32_async(block, kPoisonBits, 64 * sizeof(float), &stream);
  stream.synchronize();
  EXPECT_EQ(count_poison(block, 64), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(block[i]));
  EXPECT_EQ(count_poison(neighbour, 64), 0u);
  EXPECT_FLOAT_EQ(neighbour[0], 1.5f);
  // Arithmetic on poison stays NaN, so a read-after-free shows in the loss.
  EXPECT_TRUE(std::isnan(block[3] * 0.0f + 1.0f));
  EXPECT_EQ(first_non_finite(block, 64), 0u);
  EXPECT_EQ(first_non_finite(neighbour, 64), 64u);
  device_free(memory);
}

TEST(DeviceMemory, HostMemoryIsAligned) {
  std::string error;
  HostMemory host = host_alloc(12345, &error);
  ASSERT_NE(host.base, nullptr) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.base) % kDeviceAlignmentBytes, 0u);
  host_free(host);
}

}  // namespace
}  // namespace mplan::rt
