#include "runtime/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mplan::rt {
namespace {

// Pillow's Resample.c, for 8 bits per channel.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Per output pixel: the first input pixel, the count, and the fixed-point
// weights (precompute_coeffs and normalize_coeffs_8bpc).
struct Coefficients {
  int64_t size = 0;  // weights per output pixel (ksize)
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
};

Coefficients coefficients(int64_t in_size, int64_t out_size) {
  Coefficients c;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  c.size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size * c.size), 0);
  std::vector<double> k(static_cast<size_t>(c.size));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    const auto xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    double total = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      k[static_cast<size_t>(x)] = bilinear_filter((static_cast<double>(x + xmin) - center + 0.5) * ss);
      total += k[static_cast<size_t>(x)];
    }
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = total != 0.0 ? k[static_cast<size_t>(x)] / total : k[static_cast<size_t>(x)];
      c.weights[static_cast<size_t>(xx * c.size + x)] =
          static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[static_cast<size_t>(xx)] = xmin;
    c.count[static_cast<size_t>(xx)] = xmax;
  }
  return c;
}

uint8_t clip8(int64_t value) {
  if (value >= (int64_t{1} << kPrecisionBits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<uint8_t>(value >> kPrecisionBits);
}

// One pass along the rows (horizontal) or the columns (vertical).
Image resample(const Image& in, int64_t out_size, bool horizontal) {
  const int64_t in_size = horizontal ? in.width : in.height;
  const Coefficients c = coefficients(in_size, out_size);
  Image out;
  out.channels = in.channels;
  out.height = horizontal ? in.height : out_size;
  out.width = horizontal ? out_size : in.width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  const int64_t ch = in.channels;
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const int32_t* k = c.weights.data() + o * c.size;
      const int64_t first = c.first[static_cast<size_t>(o)], count = c.count[static_cast<size_t>(o)];
      for (int64_t b = 0; b < ch; ++b) {
        int64_t sum = int64_t{1} << (kPrecisionBits - 1);
        for (int64_t i = 0; i < count; ++i) {
          const int64_t at = horizontal ? (y * in.width + first + i) : ((first + i) * in.width + x);
          sum += static_cast<int64_t>(in.pixels[static_cast<size_t>(at * ch + b)]) * k[i];
        }
        out.pixels[static_cast<size_t>((y * out.width + x) * ch + b)] = clip8(sum);
      }
    }
  return out;
}

}  // namespace

Image resize_bilinear(const Image& in, int64_t height, int64_t width) {
  const bool horizontal = width != in.width, vertical = height != in.height;
  if (!horizontal && !vertical) return in;
  if (!horizontal) return resample(in, height, false);
  Image wide = resample(in, width, true);
  return vertical ? resample(wide, height, false) : wide;
}

Image crop(const Image& in, const Window& w) {
  Image out;
  out.channels = in.channels;
  out.height = w.height;
  out.width = w.width;
  out.pixels.assign(static_cast<size_t>(w.height * w.width * in.channels), 0);
  for (int64_t y = 0; y < w.height; ++y) {
    const int64_t sy = w.top + y;
    if (sy < 0 || sy >= in.height) continue;
    for (int64_t x = 0; x < w.width; ++x) {
      const int64_t sx = w.left + x;
      if (sx < 0 || sx >= in.width) continue;
      std::copy_n(in.pixels.begin() + (sy * in.width + sx) * in.channels, in.channels,
                  out.pixels.begin() + (y * w.width + x) * in.channels);
    }
  }
  return out;
}

Image resize_shorter_side(const Image& in, int64_t size) {
  if (in.width <= in.height) {
    const auto height = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(in.height) /
                                             static_cast<double>(in.width));
    return resize_bilinear(in, height, size);
  }
  const auto width = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(in.width) /
                                          static_cast<double>(in.height));
  return resize_bilinear(in, size, width);
}

Window center_window(int64_t image_height, int64_t image_width, int64_t height, int64_t width) {
  // Python's round: ties to even, which nearbyint gives in the default rounding mode.
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(image_height - height) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(image_width - width) / 2.0));
  return Window{top, left, height, width};
}

Window random_resized_window_of(int64_t height, int64_t width, double (*uniform)(const void*, int),
                                const void* state) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_low = std::log(3.0 / 4.0), log_high = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + (1.0 - 0.08) * uniform(state, 4 * attempt));
    const double ratio = std::exp(log_low + (log_high - log_low) * uniform(state, 4 * attempt + 1));
    // Python's round of the square roots (ties to even).
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * ratio)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / ratio)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      // torch.randint(0, n + 1): uniform over 0 .. n.
      const auto top = std::min<int64_t>(
          static_cast<int64_t>(uniform(state, 4 * attempt + 2) * static_cast<double>(height - h + 1)), height - h);
      const auto left = std::min<int64_t>(
          static_cast<int64_t>(uniform(state, 4 * attempt + 3) * static_cast<double>(width - w + 1)), width - w);
      return Window{top, left, h, w};
    }
  }
  // The fallback: the whole image, its ratio clamped to [3/4, 4/3], centred.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / (3.0 / 4.0)));
  } else if (in_ratio > 4.0 / 3.0) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * (4.0 / 3.0)));
  }
  return Window{(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace mplan::rt
