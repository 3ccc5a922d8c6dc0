#include "runtime/arena.h"

#include <cstdlib>
#include <cstring>

#include "runtime/check.h"

namespace mplan::rt {
namespace {

size_t round_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

std::byte* aligned_bytes(size_t size_bytes) {
  size_t rounded = round_up(size_bytes == 0 ? 1 : size_bytes, kArenaAlignmentBytes);
  void* p = std::aligned_alloc(kArenaAlignmentBytes, rounded);
  MPLAN_RT_CHECK(p != nullptr, "out of host memory allocating an arena or host buffer");
  return static_cast<std::byte*>(p);
}

}  // namespace

Arena arena_create(size_t size_bytes, bool poison_on_release) {
  Arena arena;
  arena.size_bytes = round_up(size_bytes, kArenaAlignmentBytes);
  arena.base = aligned_bytes(arena.size_bytes);
  arena.poison_on_release = poison_on_release;
  if (poison_on_release) poison_fill(arena.base, arena.size_bytes);
  return arena;
}

void arena_destroy(Arena& arena) {
  std::free(arena.base);
  arena = Arena{};
}

void* arena_at(const Arena& arena, size_t offset_bytes, size_t size_bytes) {
  MPLAN_RT_CHECK(arena.base != nullptr, "arena used before arena_create");
  MPLAN_RT_CHECK(offset_bytes <= arena.size_bytes && size_bytes <= arena.size_bytes - offset_bytes,
                 "region lies outside the arena");
  return arena.base + offset_bytes;
}

void arena_release(const Arena& arena, size_t offset_bytes, size_t size_bytes) {
  void* region = arena_at(arena, offset_bytes, size_bytes);
  if (arena.poison_on_release) poison_fill(region, size_bytes);
}

void poison_fill(void* data, size_t size_bytes) {
  auto* bytes = static_cast<unsigned char*>(data);
  size_t whole = size_bytes / sizeof(uint32_t);
  for (size_t i = 0; i < whole; ++i) std::memcpy(bytes + i * 4, &kPoisonBits, 4);
  std::memset(bytes + whole * 4, 0xff, size_bytes - whole * 4);
}

bool is_poison(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits == kPoisonBits;
}

size_t count_poison(const float* data, size_t count) {
  size_t poisoned = 0;
  for (size_t i = 0; i < count; ++i) poisoned += is_poison(data[i]) ? 1 : 0;
  return poisoned;
}

HostBuffer host_buffer_create(size_t size_bytes) {
  HostBuffer buffer;
  buffer.size_bytes = size_bytes;
  buffer.data = aligned_bytes(size_bytes);
  return buffer;
}

void host_buffer_destroy(HostBuffer& buffer) {
  std::free(buffer.data);
  buffer = HostBuffer{};
}

void* host_at(const HostBuffer& buffer, size_t offset_bytes, size_t size_bytes) {
  MPLAN_RT_CHECK(buffer.data != nullptr, "host buffer used before host_buffer_create");
  MPLAN_RT_CHECK(offset_bytes <= buffer.size_bytes && size_bytes <= buffer.size_bytes - offset_bytes,
                 "region lies outside the host buffer");
  return buffer.data + offset_bytes;
}

}  // namespace mplan::rt
