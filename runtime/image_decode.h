#pragma once
// JPEG and PNG files decoded to 8-bit pixels (`train --data DIR` of an image
// folder or of shards: runtime/image_folder.h), with libjpeg-turbo and libpng
// from Debian's packages (libjpeg62-turbo-dev, libpng-dev). Both decode as
// PIL does: libjpeg's default (islow) DCT, so the pixels are those
// torchvision's ImageFolder loader gives.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mplan::rt {

// An 8-bit image, rows of pixels, channels interleaved (H, W, C).
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

enum class ImageFormat { unknown, jpeg, png };
// From the file's first bytes (its magic number).
ImageFormat image_format(const uint8_t* data, size_t size);
const char* image_format_name(ImageFormat format);

// Whether this build decodes images (libjpeg and libpng were found when the
// runtime was built; without them an image folder is refused with a message).
bool image_codecs_available();

// Decodes a JPEG or PNG file's bytes into `channels` (1: grey, 3: RGB, as
// PIL's convert("L") and convert("RGB"); an alpha channel is dropped, a
// palette expanded). False, with *error saying what is wrong with the bytes,
// on a file that is neither or does not decode to the end.
bool decode_image(const uint8_t* data, size_t size, int64_t channels, Image* out, std::string* error);

// The size in the file's header alone (no pixels decoded): what a scan of
// an image folder checks. False, with *error, where the header is not a
// JPEG's or a PNG's.
bool read_image_size(const uint8_t* data, size_t size, int64_t* height, int64_t* width, std::string* error);

}  // namespace mplan::rt
