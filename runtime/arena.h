#pragma once
// The device arena and host buffers of a generated training program.
//
// The arena is one allocation made once at start-up (like llm.c's single
// cudaMalloc); the plan places every block at a fixed byte offset in it, so the
// runtime never allocates during a step. On the CPU backend the "device" arena is
// ordinary memory aligned to kArenaAlignmentBytes. Host buffers hold offloaded
// blocks (moDNN §IV, vDNN): pinned on CUDA, plain aligned memory on the CPU.
//
// Debug poisoning: with poison_on_release set, arena_release() fills the released
// region with a NaN pattern, so a schedule that reads a block after it is freed
// or after it was offloaded and dropped computes NaN instead of silently reading
// stale data (DESIGN.md: "a missing wait in the schedule is a real race that
// tests catch, e.g. by poisoning freed memory").

#include <cstddef>
#include <cstdint>

namespace mplan::rt {

inline constexpr size_t kArenaAlignmentBytes = 256;

// The float bit pattern written by poisoning: a quiet NaN with a recognisable
// payload (0x7fc0dead), so a NaN met while debugging can be told apart from one
// produced by arithmetic.
inline constexpr uint32_t kPoisonBits = 0x7fc0deadu;

struct Arena {
  std::byte* base = nullptr;      // aligned to kArenaAlignmentBytes
  size_t size_bytes = 0;
  bool poison_on_release = false;  // debug mode: NaN-fill released regions
};

// Allocates an arena of size_bytes (rounded up to the alignment). Aborts if the
// memory cannot be had. A fresh arena is itself poisoned in debug mode, so a read
// of a block that was never written is caught too.
Arena arena_create(size_t size_bytes, bool poison_on_release);
void arena_destroy(Arena& arena);

// The address of [offset_bytes, offset_bytes + size_bytes) in the arena; aborts if
// the region lies outside it. Offsets come from the plan and are constexpr in the
// generated program.
void* arena_at(const Arena& arena, size_t offset_bytes, size_t size_bytes);
inline float* arena_f32(const Arena& arena, size_t offset_bytes, size_t count) {
  return static_cast<float*>(arena_at(arena, offset_bytes, count * sizeof(float)));
}
inline int32_t* arena_i32(const Arena& arena, size_t offset_bytes, size_t count) {
  return static_cast<int32_t*>(arena_at(arena, offset_bytes, count * sizeof(int32_t)));
}

// Marks a region free (the block was freed, or offloaded and its device copy
// dropped). In debug mode it is filled with the poison pattern; otherwise this
// does nothing. Call it in stream order: enqueue it on the stream that performs
// the free, after the region's last reader, so it runs when the plan frees.
void arena_release(const Arena& arena, size_t offset_bytes, size_t size_bytes);

// Fills bytes with the poison pattern (whole floats; a trailing partial float is
// filled with 0xff bytes).
void poison_fill(void* data, size_t size_bytes);
// Whether a float holds exactly the poison pattern.
bool is_poison(float value);
// How many of count floats hold the poison pattern.
size_t count_poison(const float* data, size_t count);

// A host-side buffer for offloaded blocks and for data loading. Pinned
// (cudaHostAlloc) on the CUDA backend; aligned ordinary memory on the CPU.
struct HostBuffer {
  std::byte* data = nullptr;
  size_t size_bytes = 0;
};
HostBuffer host_buffer_create(size_t size_bytes);
void host_buffer_destroy(HostBuffer& buffer);
void* host_at(const HostBuffer& buffer, size_t offset_bytes, size_t size_bytes);

}  // namespace mplan::rt
