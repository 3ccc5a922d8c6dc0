#pragma once
// The geometric transforms of image-file data (runtime/image_folder.h), as
// torchvision's transforms compute them on the PIL images its ImageFolder
// loads: Resize (PIL's bilinear filter, bit for bit), CenterCrop and
// RandomResizedCrop's choice of window.

#include <cstdint>

#include "runtime/image_decode.h"

namespace mplan::rt {

// A window of an image: rows top .. top+height-1, columns left .. left+width-1.
struct Window {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// PIL's Image.resize(size, BILINEAR) (Pillow's Resample.c: a triangle filter
// widened by the scale where it shrinks, coefficients in 22-bit fixed point,
// the horizontal pass first, each pass rounded to 8 bits).
Image resize_bilinear(const Image& in, int64_t height, int64_t width);

// The window `w` of `in`; parts outside the image are zeros (torchvision's
// CenterCrop pads a smaller image).
Image crop(const Image& in, const Window& w);

// torchvision's Resize(size) with an int: the shorter side becomes `size`,
// the longer int(size * long / short).
Image resize_shorter_side(const Image& in, int64_t size);

// torchvision's CenterCrop((height, width)): the window's offsets are
// round((H - height) / 2) and round((W - width) / 2), ties to even (Python's round).
Window center_window(int64_t image_height, int64_t image_width, int64_t height, int64_t width);

// RandomResizedCrop's window (torchvision's get_params, scale (0.08, 1) and
// ratio (3/4, 4/3)): up to ten draws of an area share and a log-uniform
// aspect ratio, the first that fits taken at a uniform place; else the
// centred window of the ratio clamped to the range. `uniform(k)` is the
// k-th uniform number in [0, 1) of the sample's draws.
template <typename Uniform>
Window random_resized_window(int64_t height, int64_t width, const Uniform& uniform);

// The same with the draws given as a function pointer (its definition).
Window random_resized_window_of(int64_t height, int64_t width, double (*uniform)(const void*, int), const void* state);

template <typename Uniform>
Window random_resized_window(int64_t height, int64_t width, const Uniform& uniform) {
  return random_resized_window_of(
      height, width, [](const void* s, int k) { return (*static_cast<const Uniform*>(s))(k); }, &uniform);
}

}  // namespace mplan::rt
