#pragma once
// Reading an input file (a model, a device file, a profile, a plan) into
// memory, bounded: what mplan allocates for it never exceeds a limit the
// caller states, whatever the path names (a folder, /dev/zero, a pipe, a file
// of many gigabytes). Also the UTF-8 check every text input goes through.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mplan {

// Limits of the files mplan reads. A model of the largest accepted size
// (kMaxLayers layers) takes a few tens of MiB; a plan of ResNet-2500 at many
// rounds a few hundred MiB.
inline constexpr int64_t kMaxModelFileBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxDeviceFileBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxProfileFileBytes = int64_t{512} << 20;
inline constexpr int64_t kMaxPlanFileBytes = int64_t{2} << 30;

// The whole content of `path`. `what` names the file in messages ("the model
// file"). Errors: a missing or unreadable file (ErrorKind::io); a folder,
// something that is not a regular file, or a file larger than max_bytes
// (ErrorKind::bad_input, the message says the limit).
Result<std::string> read_input_file(const std::string& path, std::string_view what, int64_t max_bytes);

// The byte offset of the first byte of `text` that is not valid UTF-8 (an
// invalid sequence, an overlong form, a surrogate, a code point past
// U+10FFFF, a truncated sequence), or std::string_view::npos if it is all
// valid.
size_t first_invalid_utf8(std::string_view text);

// Ok, or an Error at the file, line and column of the first invalid byte.
Status check_utf8(std::string_view text, const std::string& file);

// Line and column (from 1; the column counts bytes) of byte `offset` of `text`.
SourceLocation location_of_offset(std::string_view text, size_t offset, const std::string& file);

}  // namespace mplan
