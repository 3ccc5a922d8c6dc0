#pragma once
// Byte counts as users write and read them: binary units (KiB, MiB, GiB, TiB).

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mplan {

// Parses "8GiB", "512 MiB", "1.5GiB" or "4096" (bytes). Units are
// case-insensitive: B, K/KiB, M/MiB, G/GiB, T/TiB are binary; KB, MB, GB, TB
// are decimal (12GB is 12*10^9 bytes). Rejects negatives, empty text and
// unknown units with a message that says what was expected.
Result<int64_t> parse_bytes(std::string_view text);

// "7.50 GiB (8053063680 bytes)" style helpers.
std::string format_bytes(int64_t bytes);             // "7.50 GiB"
std::string format_bytes_exact(int64_t bytes);       // "7.50 GiB (8053063680 B)"

}  // namespace mplan
