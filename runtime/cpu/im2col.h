#pragma once
// Rows of an implicit im2col matrix, written straight into GEMM packing buffers
// (runtime/cpu/conv_tiled_gemm.cpp). Row (c, r, s) of im2col(x), at the output pixels
// j .. j+len of the batch-wide grid (image, oh, ow), holds
//   x[image, c, oh*stride_h - pad_h + r, ow*stride_w - pad_w + s]   (0 outside x).
// The backward-data gather (col(dy)) is the same with dy as the source, the tap
// rotated and pad r-1-pad.
//
// Rows are packed a panel (at most 32 pixels) at a time, so that everything that
// depends only on the panel or only on the tap is worked out once: the panel's runs
// of pixels along one grid row, each tap's range of valid output rows and columns.
// Where the convolution keeps the size at stride 1 (the source row is as wide as the
// grid row), a panel inside one image is one contiguous stretch of the source per
// tap, zeroed outside the image by a bit mask per tap row and tap column: with
// AVX-512, one or two masked loads per row.

#include <cstdint>

#include "runtime/cpu/conv_window.h"

namespace mplan::rt::cpu {

struct Im2colSource {
  const float* data = nullptr;
  int64_t image_floats = 0;  // floats from one image to the next
  int64_t h = 1, w = 1;      // source plane
  int64_t grid_h = 1, grid_w = 1;  // output grid of one image
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// One row of im2col: a channel (its plane's offset in floats from the start of an
// image) and a filter tap.
struct Im2colTap {
  int64_t channel_offset = 0;
  int32_t r = 0, s = 0;
};

class Im2colPacker {
 public:
  static constexpr int64_t kMaxTaps = 32;      // filter rows and columns (r, s <= 32)
  static constexpr int64_t kMaxPanel = 32;     // pixels per panel
  // src's filter is taps_h x taps_w, at most kMaxTaps each.
  Im2colPacker(const Im2colSource& src, int64_t taps_h, int64_t taps_w);
  static bool supports(int64_t taps_h, int64_t taps_w) { return taps_h <= kMaxTaps && taps_w <= kMaxTaps; }

  // For each of count rows: dst + i*dst_stride [0 .. width) = row taps[i] at grid
  // pixels j .. j+len, zeros from len to width (len <= width, width 16 or 32).
  void rows(const Im2colTap* taps, int64_t count, int64_t j, int64_t len, float* dst, int64_t dst_stride,
            int64_t width) const;

 private:
  Im2colSource src_;
  int64_t taps_h_, taps_w_;
  bool contiguous_;  // stride 1, source rows as wide as grid rows, AVX-512
  bool pointwise_;   // 1x1, stride 1, no padding: rows are the planes themselves
  // Bit t: pixel j+t of the panel reads a source row (column) inside the image, per tap row (column).
  void tap_masks(int64_t j, int64_t len, uint32_t* row_ok, uint32_t* col_ok) const;
  OutputRange rows_ok_[kMaxTaps], cols_ok_[kMaxTaps];
};

}  // namespace mplan::rt::cpu
