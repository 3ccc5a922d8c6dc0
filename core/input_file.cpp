#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "core/bytes.h"

namespace mplan {

Result<std::string> read_input_file(const std::string& path, std::string_view what, int64_t max_bytes) {
  auto io_error = [&](const std::string& why) {
    return Error{SourceLocation{path, 0, 0}, fmt::format("cannot read {}: {}", what, why), ErrorKind::io};
  };
  auto bad = [&](const std::string& why) {
    return Error{SourceLocation{path, 0, 0}, fmt::format("cannot read {}: {}", what, why)};
  };
  if (path.empty()) return bad("the path is empty");
  // O_NONBLOCK: opening a FIFO without a writer must not hang; the type check
  // below refuses it anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return io_error(std::strerror(errno));
  if (S_ISDIR(info.st_mode)) return bad("it is a directory");
  if (!S_ISREG(info.st_mode)) return bad("it is not a regular file (a device, pipe or socket)");
  if (info.st_size > max_bytes)
    return bad(fmt::format("it has {} bytes, more than the {} such a file may have", info.st_size,
                           format_bytes(max_bytes)));
  std::string text;
  text.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error(std::strerror(errno));
    }
    if (got == 0) break;
    // The file may grow while it is read: the limit holds for what is read.
    if (static_cast<int64_t>(text.size()) + got > max_bytes)
      return bad(fmt::format("it has more than the {} such a file may have", format_bytes(max_bytes)));
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

size_t first_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = bytes[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint32_t code = 0, min_code = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, min_code = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, min_code = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, min_code = 0x10000;
    } else {
      return i;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    if (i + length > n) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (bytes[i + k] & 0x3F);
    }
    if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

SourceLocation location_of_offset(std::string_view text, size_t offset, const std::string& file) {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return SourceLocation{file, line, column};
}

Status check_utf8(std::string_view text, const std::string& file) {
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string_view::npos) return Ok{};
  return Error{location_of_offset(text, bad, file),
               fmt::format("byte 0x{:02X} is not valid UTF-8 (the file must be UTF-8 text; names may use any "
                           "Unicode character, written in UTF-8)",
                           static_cast<unsigned char>(text[bad]))};
}

}  // namespace mplan
