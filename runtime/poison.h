#pragma once
// Debug poisoning (docs/generated-program.md, --debug-poison): the program's
// device memory starts filled with a NaN pattern, and every region whose buffer
// dies (freed, or offloaded and dropped) is refilled with it after its last
// user, so a schedule that reads a block after it is freed, or before its copy
// has landed, computes NaN instead of silently reading stale data: a missing
// wait in the schedule is a real race, and this makes the tests catch it.

#include <cstddef>
#include <cstdint>

namespace mplan::rt {

// The float bit pattern written by poisoning: a quiet NaN with a recognisable
// payload (0x7fc0dead), so a NaN met while debugging can be told apart from one
// produced by arithmetic.
inline constexpr uint32_t kPoisonBits = 0x7fc0deadu;

// Whether a float holds exactly the poison pattern.
bool is_poison(float value);
// How many of count floats (host memory) hold the poison pattern.
size_t count_poison(const float* data, size_t count);
// Index of the first float of count that is not finite, or count if none.
size_t first_non_finite(const float* data, size_t count);

}  // namespace mplan::rt
