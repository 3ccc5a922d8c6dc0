// The arena: one aligned allocation, bounds-checked regions, and debug poisoning
// of released regions.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "runtime/arena.h"

namespace mplan::rt {
namespace {

TEST(Arena, IsAlignedAndRoundedUp) {
  Arena arena = arena_create(1000, /*poison_on_release=*/false);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.base) % kArenaAlignmentBytes, 0u);
  EXPECT_EQ(arena.size_bytes, 1024u);
  EXPECT_EQ(arena_at(arena, 256, 768), arena.base + 256);
  arena_destroy(arena);
  EXPECT_EQ(arena.base, nullptr);
}

TEST(Arena, ReleaseFillsNaNInDebugMode) {
  Arena arena = arena_create(4096, /*poison_on_release=*/true);
  float* block = arena_f32(arena, 512, 64);
  float* neighbour = arena_f32(arena, 768, 64);
  for (int i = 0; i < 64; ++i) block[i] = neighbour[i] = 1.5f;
  arena_release(arena, 512, 64 * sizeof(float));
  EXPECT_EQ(count_poison(block, 64), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(block[i]));
  // Only the released region: the block after it is untouched.
  EXPECT_EQ(count_poison(neighbour, 64), 0u);
  EXPECT_FLOAT_EQ(neighbour[0], 1.5f);
  // Arithmetic on poison stays NaN, so a read-after-free shows in the loss.
  EXPECT_TRUE(std::isnan(block[3] * 0.0f + 1.0f));
  arena_destroy(arena);
}

TEST(Arena, FreshDebugArenaIsPoisoned) {
  Arena arena = arena_create(1024, /*poison_on_release=*/true);
  EXPECT_EQ(count_poison(arena_f32(arena, 0, 256), 256), 256u);
  arena_destroy(arena);
}

TEST(Arena, ReleaseWithoutDebugLeavesData) {
  Arena arena = arena_create(1024, /*poison_on_release=*/false);
  float* block = arena_f32(arena, 0, 16);
  for (int i = 0; i < 16; ++i) block[i] = 2.0f;
  arena_release(arena, 0, 64);
  EXPECT_EQ(count_poison(block, 16), 0u);
  EXPECT_FLOAT_EQ(block[7], 2.0f);
  arena_destroy(arena);
}

TEST(Arena, HostBuffersAreAligned) {
  HostBuffer host = host_buffer_create(12345);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.data) % kArenaAlignmentBytes, 0u);
  EXPECT_EQ(host_at(host, 100, 200), host.data + 100);
  host_buffer_destroy(host);
}

TEST(ArenaDeathTest, RegionOutsideTheArenaAborts) {
  Arena arena = arena_create(1024, false);
  EXPECT_DEATH(arena_at(arena, 1000, 100), "outside the arena");
  arena_destroy(arena);
}

}  // namespace
}  // namespace mplan::rt
