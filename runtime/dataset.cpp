#include "runtime/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "runtime/image_decode.h"
#include "runtime/image_transform.h"

namespace mplan::rt {
namespace {

// SplitMix64's finaliser: a counter-based hash, so that a permutation is a
// pure function of (seed, epoch).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

std::optional<Augment> parse_augment(const std::string& text, std::string* error) {
  Augment a;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item == "flip" && !a.flip) {
      a.flip = true;
    } else if (item == "rrc" && !a.random_resized_crop) {
      a.random_resized_crop = true;
    } else if (item.rfind("crop=", 0) == 0 && a.crop_padding < 0) {
      const std::string value = item.substr(5);
      char* end = nullptr;
      errno = 0;
      const long long pad = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || errno != 0 || *end != '\0' || pad < 0 || pad > 1024) {
        *error = "'" + text + "': " + item + ": expected crop=PADDING, PADDING a whole number of pixels in [0, 1024]";
        return std::nullopt;
      }
      a.crop_padding = pad;
    } else {
      const bool known = item == "flip" || item == "rrc" || item.rfind("crop=", 0) == 0;
      *error = "'" + text + "': '" + item + "'" +
               (known ? " is given twice" : " is not an augmentation (expected crop=PADDING, flip, rrc)");
      return std::nullopt;
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return a;
}

AugmentDraw draw_augment(const Augment& augment, uint64_t seed, uint64_t place) {
  const uint64_t key = mix(mix(seed ^ 0xa06e47a06e47a06eull) + place);
  AugmentDraw d;
  if (augment.crop_padding > 0) {
    const auto range = static_cast<uint64_t>(2 * augment.crop_padding + 1);
    d.dy = static_cast<int64_t>((static_cast<unsigned __int128>(mix(key + 1)) * range) >> 64);
    d.dx = static_cast<int64_t>((static_cast<unsigned __int128>(mix(key + 2)) * range) >> 64);
  } else if (augment.crop_padding == 0) {
    d.dy = d.dx = 0;
  }
  if (augment.flip) d.flip = (mix(key + 3) >> 63) != 0;
  return d;
}

void apply_augment(const Augment& augment, const AugmentDraw& draw, int64_t channels, int64_t height, int64_t width,
                   float* image, float* scratch) {
  const int64_t plane = height * width;
  const int64_t pad = std::max<int64_t>(augment.crop_padding, 0);
  std::memcpy(scratch, image, static_cast<size_t>(channels * plane) * sizeof(float));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        // The crop's pixel (y, x) is the padded image's (y + dy, x + dx); the
        // flip then mirrors the cropped window.
        const int64_t cx = draw.flip ? width - 1 - x : x;
        const int64_t sy = y + draw.dy - pad, sx = cx + draw.dx - pad;
        image[c * plane + y * width + x] =
            sy >= 0 && sy < height && sx >= 0 && sx < width ? scratch[c * plane + sy * width + sx] : 0.0f;
      }
}

namespace {

// Decodes image-file sample `index` (or, with skip_corrupt, the next one in
// file order that decodes) and brings it to (height, width): RandomResizedCrop
// with `augment`, else Resize(resize) and CenterCrop (runtime/image_transform.h).
bool read_image(const Dataset& d, int64_t index, uint64_t place, Image* image, int64_t* used, std::string* error) {
  std::vector<uint8_t> bytes;
  Image decoded;
  for (int64_t t = 0; t < d.count; ++t) {
    const int64_t i = (index + t) % d.count;
    std::string problem;
    if (d.files->read(i, &bytes, &problem) && decode_image(bytes.data(), bytes.size(), d.channels, &decoded, &problem)) {
      *used = i;
      break;
    }
    if (problem.rfind(d.files->name(i), 0) != 0) problem = d.files->name(i) + ": " + problem;
    if (!d.skip_corrupt) {
      *error = problem + " (--skip-corrupt replaces such samples by the next readable one, and counts them)";
      return false;
    }
    const std::lock_guard<std::mutex> lock(d.skipped->mutex);
    if (d.skipped->samples.insert(i).second && d.skipped->first.empty()) d.skipped->first = problem;
    if (t + 1 == d.count) {
      *error = "no image of the data set decodes; the first: " + d.skipped->first;
      return false;
    }
  }
  if (d.augment.random_resized_crop) {
    const uint64_t key = mix(mix(d.seed ^ 0x7cc5a3f1d2e4b609ull) + place);
    const auto uniform = [key](int k) {
      return static_cast<double>(mix(key + static_cast<uint64_t>(k)) >> 11) * (1.0 / 9007199254740992.0);
    };
    *image = resize_bilinear(crop(decoded, random_resized_window(decoded.height, decoded.width, uniform)), d.height,
                             d.width);
    return true;
  }
  const int64_t size = d.resize > 0 ? d.resize : std::max(d.height, d.width);
  if (std::min(decoded.height, decoded.width) != size) decoded = resize_shorter_side(decoded, size);
  *image = decoded.height == d.height && decoded.width == d.width
               ? std::move(decoded)
               : crop(decoded, center_window(decoded.height, decoded.width, d.height, d.width));
  return true;
}

}  // namespace

bool Dataset::read(int64_t index, uint64_t place, float* out, int64_t* used, std::string* error) const {
  const int64_t plane = height * width, elements = channels * plane;
  *used = index;
  if (files) {
    Image image;
    if (!read_image(*this, index, place, &image, used, error)) return false;
    // ToTensor: (H, W, C) bytes to (C, H, W) floats over 255.
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        out[c * plane + p] = static_cast<float>(image.pixels[static_cast<size_t>(p * channels + c)]) / 255.0f;
  } else if (images->type() == NpyType::f32) {
    std::memcpy(out, images->data() + index * elements * 4, static_cast<size_t>(elements) * sizeof(float));
  } else {
    // uint8 to [0, 1] as torchvision's ToTensor: the byte over 255, in float.
    const uint8_t* x = images->data() + index * elements;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        out[c * plane + p] = static_cast<float>(x[channels_last ? p * channels + c : c * plane + p]) / 255.0f;
  }
  if (augment.crop_padding >= 0 || augment.flip) {
    std::vector<float> scratch(static_cast<size_t>(elements));
    apply_augment(augment, draw_augment(augment, seed, place), channels, height, width, out, scratch.data());
  }
  // Normalize(mean, std) as torchvision computes it: (x - mean) / std.
  if (!mean.empty())
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p) out[c * plane + p] = (out[c * plane + p] - mean[c]) / std[c];
  return true;
}

namespace {

bool load_npy_files(const std::string& dir, int64_t channels, int64_t height, int64_t width, int32_t classes,
                    Dataset* data, std::string* error);

// An image folder or a shard folder as the data set (load_dataset).
bool load_image_files(const std::string& dir, int64_t channels, int32_t classes, Dataset* data, std::string* error) {
  if (!image_codecs_available()) {
    std::string why;
    decode_image(nullptr, 0, 3, nullptr, &why);
    *error = dir + ": a folder of image files, but " + why;
    return false;
  }
  if (channels != 1 && channels != 3) {
    *error = dir + ": image files decode to 1 (grey) or 3 (RGB) channels; the model's input has " +
             std::to_string(channels);
    return false;
  }
  data->shards = is_shard_folder(dir);
  if (data->shards) {
    data->files = open_shards(dir, &data->labels, &data->classes, error);
    if (!data->files) return false;
  } else {
    ImageFolderListing listing;
    if (!list_image_folder(dir, &listing, error)) return false;
    data->classes = listing.classes;
    data->labels = listing.labels;
    data->files = open_image_folder(listing);
  }
  if (static_cast<int64_t>(data->classes.size()) > classes) {
    *error = dir + ": " + std::to_string(data->classes.size()) + " classes (" + data->classes.front() + " ... " +
             data->classes.back() + "), but the model has " + std::to_string(classes);
    return false;
  }
  data->count = data->files->count();
  return true;
}

}  // namespace

bool load_dataset(const std::string& dir, int64_t channels, int64_t height, int64_t width, int32_t classes,
                  const std::vector<float>& mean, const std::vector<float>& std, Dataset* data, std::string* error) {
  if (mean.size() != std.size() || (!mean.empty() && static_cast<int64_t>(mean.size()) != channels)) {
    *error = "--mean and --std: expected " + std::to_string(channels) + " values each (one per channel), got " +
             std::to_string(mean.size()) + " and " + std::to_string(std.size());
    return false;
  }
  std::error_code ec;
  // Shards (shards.json), else a folder without images.npy and labels.npy: image files.
  if (is_shard_folder(dir) ||
      (!std::filesystem::exists(dir + "/images.npy", ec) && !std::filesystem::exists(dir + "/labels.npy", ec) &&
       std::filesystem::is_directory(dir, ec))) {
    if (!load_image_files(dir, channels, classes, data, error)) return false;
  } else if (!load_npy_files(dir, channels, height, width, classes, data, error)) {
    return false;
  }
  data->channels = channels;
  data->height = height;
  data->width = width;
  data->mean = mean;
  data->std = std;
  return true;
}

namespace {

// DIR/images.npy (mapped) and DIR/labels.npy as the data set (load_dataset).
bool load_npy_files(const std::string& dir, int64_t channels, int64_t height, int64_t width, int32_t classes,
                    Dataset* data, std::string* error) {
  NpyArray labels;
  if (!npy_read(dir + "/labels.npy", &labels, error)) return false;
  if (labels.type != NpyType::i32 || labels.shape.size() != 1 || labels.shape[0] < 1) {
    *error = dir + "/labels.npy: expected int32 of shape (N,) with N >= 1, got " + npy_type_name(labels.type) +
             " of shape " + shape_text(labels.shape);
    return false;
  }
  auto images = std::make_shared<NpyMap>();
  if (!images->open(dir + "/images.npy", error)) return false;
  const int64_t n = labels.shape[0];
  const std::vector<int64_t>& shape = images->shape();
  const std::vector<int64_t> nchw = {n, channels, height, width}, nhwc = {n, height, width, channels};
  const bool ok = (images->type() == NpyType::f32 && shape == nchw) ||
                  (images->type() == NpyType::u8 && (shape == nchw || shape == nhwc));
  if (!ok) {
    *error = dir + ": expected images.npy float32 of shape " + shape_text(nchw) + ", or uint8 of shape " +
             shape_text(nchw) + " or " + shape_text(nhwc) + ", for labels.npy's " + std::to_string(n) +
             " samples; got images.npy " + npy_type_name(images->type()) + " of shape " + shape_text(shape);
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels.i32()[i];
    if (label < 0 || label >= classes) {
      *error = dir + "/labels.npy: label " + std::to_string(label) + " at " + std::to_string(i) +
               " is not a class in [0, " + std::to_string(classes) + ")";
      return false;
    }
  }
  data->images = std::move(images);
  data->channels_last = data->images->type() == NpyType::u8 && shape == nhwc && nhwc != nchw;
  data->labels.assign(labels.i32(), labels.i32() + n);
  data->count = n;
  return true;
}

}  // namespace

std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  const uint64_t key = mix(mix(seed ^ 0x5eedda7a5eedda7aull) + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    // Uniform in [0, i] by the high half of a 64 x 64-bit product.
    const uint64_t h = mix(key + static_cast<uint64_t>(i));
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(h) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

int64_t SampleOrder::index(uint64_t step, int64_t k) const {
  if (evaluation) {
    const int64_t at = static_cast<int64_t>(step) * batch + k;
    return at < count ? at : -1;
  }
  if (!epochs) return static_cast<int64_t>((step * static_cast<uint64_t>(batch) + static_cast<uint64_t>(k)) %
                                           static_cast<uint64_t>(count));
  const int64_t per_epoch = steps_per_epoch();
  const int64_t at = static_cast<int64_t>(step % static_cast<uint64_t>(per_epoch)) * batch + k;
  return shuffle ? permutation_[static_cast<size_t>(at)] : at;
}

void SampleOrder::prepare(uint64_t step) {
  if (!epochs || !shuffle) return;
  const auto epoch = static_cast<int64_t>(step / static_cast<uint64_t>(steps_per_epoch()));
  if (epoch == epoch_) return;
  permutation_ = epoch_permutation(seed, epoch, count);
  epoch_ = epoch;
}

}  // namespace mplan::rt
