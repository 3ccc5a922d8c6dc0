#include "runtime/image_decode.h"

#include <cstdio>
#include <cstring>

#ifdef MPLAN_HAVE_IMAGE_CODECS
#include <csetjmp>

#include <jpeglib.h>
#include <png.h>
#endif

namespace mplan::rt {

ImageFormat image_format(const uint8_t* data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return ImageFormat::jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::png: return "PNG";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

namespace {

std::string unknown_format_message(const uint8_t* data, size_t size) {
  char text[96];
  if (size == 0) return "an empty file, not a JPEG or PNG image";
  std::snprintf(text, sizeof text, "not a JPEG or PNG image (it starts with 0x%02x 0x%02x)", data[0],
                size > 1 ? data[1] : 0);
  return text;
}

}  // namespace

#ifdef MPLAN_HAVE_IMAGE_CODECS

bool image_codecs_available() { return true; }

namespace {

// libjpeg reports errors through error_exit, which must not return: it jumps
// back to the decoder with the message (no C++ object lives across the jump).
struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, error->message);
  std::longjmp(error->jump, 1);
}

// A corrupt-data warning (a truncated file: "Premature end of JPEG file")
// is an error here: the pixels would be partly grey.
void jpeg_warning(j_common_ptr info, int level) {
  if (level < 0) jpeg_error_exit(info);
}

// Decodes (or, without `pixels`, reads the header of) a JPEG into its own
// channels (grey, or RGB for a colour file, as PIL opens it: *channels);
// the message on failure.
bool decode_jpeg(const uint8_t* data, size_t size, int* channels, int64_t* height, int64_t* width,
                 std::vector<uint8_t>* pixels, char* message) {
  jpeg_decompress_struct info;
  JpegError error;
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = jpeg_error_exit;
  error.manager.emit_message = jpeg_warning;
  if (setjmp(error.jump)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", error.message);
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  *height = info.image_height;
  *width = info.image_width;
  if (pixels != nullptr) {
    info.out_color_space = info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    *channels = info.num_components == 1 ? 1 : 3;
    jpeg_start_decompress(&info);
    const size_t row = static_cast<size_t>(info.output_width) * static_cast<size_t>(info.output_components);
    pixels->resize(row * info.output_height);
    while (info.output_scanline < info.output_height) {
      JSAMPROW rows[1] = {pixels->data() + row * info.output_scanline};
      jpeg_read_scanlines(&info, rows, 1);
    }
    jpeg_finish_decompress(&info);
  }
  jpeg_destroy_decompress(&info);
  return true;
}

// Decodes (or reads the header of) a PNG into its own 8-bit channels: grey,
// grey and alpha, RGB or RGBA (a palette expanded), as PIL opens it.
bool decode_png(const uint8_t* data, size_t size, int* channels, int64_t* height, int64_t* width,
                std::vector<uint8_t>* pixels, std::string* error) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data, size)) {
    *error = std::string("PNG: ") + image.message;
    return false;
  }
  *height = image.height;
  *width = image.width;
  if (pixels == nullptr) {
    png_image_free(&image);
    return true;
  }
  // The file's own channels at 8 bits (a palette expanded, with its alpha if
  // it has transparency); the conversion to the model's is PIL's (below).
  image.format &= ~static_cast<png_uint_32>(PNG_FORMAT_FLAG_COLORMAP | PNG_FORMAT_FLAG_LINEAR);
  *channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
  pixels->resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels->data(), 0, nullptr)) {
    *error = std::string("PNG: ") + image.message;
    png_image_free(&image);
    return false;
  }
  return true;
}

// PIL's convert("RGB") or convert("L") of an image with `from` channels
// (1 grey, 2 grey and alpha, 3 RGB, 4 RGBA): alpha is dropped, grey
// replicated, and RGB to grey is ITU-R 601-2 luma in PIL's fixed point.
void convert_channels(std::vector<uint8_t>* pixels, int from, int64_t to) {
  const size_t count = pixels->size() / static_cast<size_t>(from);
  std::vector<uint8_t> out(count * static_cast<size_t>(to));
  const uint8_t* in = pixels->data();
  for (size_t p = 0; p < count; ++p) {
    const uint8_t* px = in + p * static_cast<size_t>(from);
    if (to == 3) {
      const bool colour = from >= 3;
      out[3 * p] = px[0];
      out[3 * p + 1] = colour ? px[1] : px[0];
      out[3 * p + 2] = colour ? px[2] : px[0];
    } else if (from >= 3) {
      out[p] = static_cast<uint8_t>((px[0] * 19595 + px[1] * 38470 + px[2] * 7471 + 0x8000) >> 16);
    } else {
      out[p] = px[0];
    }
  }
  pixels->swap(out);
}

}  // namespace

bool decode_image(const uint8_t* data, size_t size, int64_t channels, Image* out, std::string* error) {
  if (channels != 1 && channels != 3) {
    *error = "images decode to 1 (grey) or 3 (RGB) channels, not " + std::to_string(channels);
    return false;
  }
  out->channels = channels;
  int own = 0;
  switch (image_format(data, size)) {
    case ImageFormat::jpeg: {
      char message[JMSG_LENGTH_MAX] = {};
      if (!decode_jpeg(data, size, &own, &out->height, &out->width, &out->pixels, message)) {
        *error = std::string("JPEG: ") + message;
        return false;
      }
      break;
    }
    case ImageFormat::png:
      if (!decode_png(data, size, &own, &out->height, &out->width, &out->pixels, error)) return false;
      break;
    case ImageFormat::unknown:
      *error = unknown_format_message(data, size);
      return false;
  }
  if (own != channels) convert_channels(&out->pixels, own, channels);
  return true;
}

bool read_image_size(const uint8_t* data, size_t size, int64_t* height, int64_t* width, std::string* error) {
  switch (image_format(data, size)) {
    case ImageFormat::jpeg: {
      char message[JMSG_LENGTH_MAX] = {};
      int own = 0;
      if (decode_jpeg(data, size, &own, height, width, nullptr, message)) return true;
      *error = std::string("JPEG: ") + message;
      return false;
    }
    case ImageFormat::png: {
      int own = 0;
      return decode_png(data, size, &own, height, width, nullptr, error);
    }
    case ImageFormat::unknown: break;
  }
  *error = unknown_format_message(data, size);
  return false;
}

#else  // no libjpeg or libpng when the runtime was built

bool image_codecs_available() { return false; }

bool decode_image(const uint8_t*, size_t, int64_t, Image*, std::string* error) {
  *error = "this runtime was built without libjpeg and libpng (libjpeg62-turbo-dev, libpng-dev); it cannot decode "
           "images";
  return false;
}

bool read_image_size(const uint8_t* data, size_t size, int64_t*, int64_t*, std::string* error) {
  return decode_image(data, size, 3, nullptr, error);
}

#endif

}  // namespace mplan::rt
