#include "runtime/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>

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
      const bool known = item == "flip" || item.rfind("crop=", 0) == 0;
      *error = "'" + text + "': '" + item + "'" +
               (known ? " is given twice" : " is not an augmentation (expected crop=PADDING, flip)");
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

void Dataset::read(int64_t index, uint64_t place, float* out) const {
  const int64_t plane = height * width, elements = channels * plane;
  if (images->type() == NpyType::f32) {
    std::memcpy(out, images->data() + index * elements * 4, static_cast<size_t>(elements) * sizeof(float));
  } else {
    // uint8 to [0, 1] as torchvision's ToTensor: the byte over 255, in float.
    const uint8_t* x = images->data() + index * elements;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        out[c * plane + p] = static_cast<float>(x[channels_last ? p * channels + c : c * plane + p]) / 255.0f;
  }
  if (augment.any()) {
    std::vector<float> scratch(static_cast<size_t>(elements));
    apply_augment(augment, draw_augment(augment, seed, place), channels, height, width, out, scratch.data());
  }
  // Normalize(mean, std) as torchvision computes it: (x - mean) / std.
  if (!mean.empty())
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p) out[c * plane + p] = (out[c * plane + p] - mean[c]) / std[c];
}

bool load_dataset(const std::string& dir, int64_t channels, int64_t height, int64_t width, int32_t classes,
                  const std::vector<float>& mean, const std::vector<float>& std, Dataset* data, std::string* error) {
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
  if (mean.size() != std.size() || (!mean.empty() && static_cast<int64_t>(mean.size()) != channels)) {
    *error = "--mean and --std: expected " + std::to_string(channels) + " values each (one per channel), got " +
             std::to_string(mean.size()) + " and " + std::to_string(std.size());
    return false;
  }
  data->images = std::move(images);
  data->channels_last = data->images->type() == NpyType::u8 && shape == nhwc && nhwc != nchw;
  data->labels.assign(labels.i32(), labels.i32() + n);
  data->count = n;
  data->channels = channels;
  data->height = height;
  data->width = width;
  data->mean = mean;
  data->std = std;
  return true;
}

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
