// Direct convolution for the shapes the general CPU algorithms do not take:
// dilated filters (any groups) and depthwise convolutions (one input channel
// per group, MobileNet's and EfficientNet's 3x3 and 5x5 layers). Each filter
// tap sweeps a whole output row at once over the valid range of columns, so
// the inner loop is a contiguous (stride 1) or strided multiply-add with no
// bounds tests; a depthwise layer does c*r*s such sweeps per image instead of
// im2col's c*r*s*p*q copies and c tiny GEMMs.

#include <algorithm>
#include <cstring>

#include "runtime/cpu/vision_kernels.h"

namespace mplan::rt::cpu {
namespace {

// The output columns q whose input column q*stride - pad + offset lies in [0, width).
struct ColumnRange {
  int64_t first = 0, end = 0;  // [first, end)
};
ColumnRange valid_columns(int64_t width, int64_t out_width, int64_t stride, int64_t pad, int64_t offset) {
  // q*stride >= pad - offset and q*stride <= width - 1 + pad - offset.
  const int64_t low = pad - offset, high = width - 1 + pad - offset;
  ColumnRange range;
  range.first = low <= 0 ? 0 : (low + stride - 1) / stride;
  range.end = high < 0 ? 0 : std::min(out_width, high / stride + 1);
  if (range.end < range.first) range.end = range.first;
  return range;
}

struct Geometry {
  int64_t in_group, out_group;  // channels per group
  int64_t p, q;
};
Geometry geometry(const ConvShape& s) { return {s.c / s.groups, s.k / s.groups, s.p(), s.q()}; }

}  // namespace

// Dilated shapes only: depthwise ones (groups == c) run the algorithms of
// runtime/cpu/conv_kernels.h, whose "direct" has a vectorised depthwise path.
bool conv_takes_general_path(const ConvShape& s) { return s.dilation_h != 1 || s.dilation_w != 1; }

void conv_forward_general(const ConvShape& s, const float* x, const float* w, float* y, bool accumulate) {
  const Geometry g = geometry(s);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t k = 0; k < s.k; ++k) {
      float* out = y + (b * s.k + k) * g.p * g.q;
      if (!accumulate) std::memset(out, 0, sizeof(float) * g.p * g.q);
      const int64_t first_channel = (k / g.out_group) * g.in_group;
      for (int64_t ci = 0; ci < g.in_group; ++ci) {
        const float* in = x + (b * s.c + first_channel + ci) * s.h * s.w;
        const float* taps = w + (k * g.in_group + ci) * s.r * s.s;
        for (int64_t r = 0; r < s.r; ++r)
          for (int64_t t = 0; t < s.s; ++t) {
            const float tap = taps[r * s.s + t];
            const ColumnRange cols = valid_columns(s.w, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
            for (int64_t p = 0; p < g.p; ++p) {
              const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              const int64_t base = ih * s.w - s.pad_w + t * s.dilation_w;  // + q*stride: in [0, w) on the row
              float* out_row = out + p * g.q;
              for (int64_t q = cols.first; q < cols.end; ++q) out_row[q] += tap * in[base + q * s.stride_w];
            }
          }
      }
    }
}

void conv_backward_data_general(const ConvShape& s, const float* w, const float* dy, float* dx, bool accumulate) {
  const Geometry g = geometry(s);
  if (!accumulate) std::memset(dx, 0, sizeof(float) * s.x_elements());
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t k = 0; k < s.k; ++k) {
      const float* grad = dy + (b * s.k + k) * g.p * g.q;
      const int64_t first_channel = (k / g.out_group) * g.in_group;
      for (int64_t ci = 0; ci < g.in_group; ++ci) {
        float* in = dx + (b * s.c + first_channel + ci) * s.h * s.w;
        const float* taps = w + (k * g.in_group + ci) * s.r * s.s;
        for (int64_t r = 0; r < s.r; ++r)
          for (int64_t t = 0; t < s.s; ++t) {
            const float tap = taps[r * s.s + t];
            const ColumnRange cols = valid_columns(s.w, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
            for (int64_t p = 0; p < g.p; ++p) {
              const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              const int64_t base = ih * s.w - s.pad_w + t * s.dilation_w;
              const float* grad_row = grad + p * g.q;
              for (int64_t q = cols.first; q < cols.end; ++q) in[base + q * s.stride_w] += tap * grad_row[q];
            }
          }
      }
    }
}

void conv_backward_filter_general(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate) {
  const Geometry g = geometry(s);
  for (int64_t k = 0; k < s.k; ++k) {
    const int64_t first_channel = (k / g.out_group) * g.in_group;
    for (int64_t ci = 0; ci < g.in_group; ++ci)
      for (int64_t r = 0; r < s.r; ++r)
        for (int64_t t = 0; t < s.s; ++t) {
          const ColumnRange cols = valid_columns(s.w, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
          double sum = 0.0;
          for (int64_t b = 0; b < s.n; ++b) {
            const float* in = x + (b * s.c + first_channel + ci) * s.h * s.w;
            const float* grad = dy + (b * s.k + k) * g.p * g.q;
            for (int64_t p = 0; p < g.p; ++p) {
              const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              const int64_t base = ih * s.w - s.pad_w + t * s.dilation_w;
              const float* grad_row = grad + p * g.q;
              float partial = 0.0f;  // one output row in float, rows summed in double
              for (int64_t q = cols.first; q < cols.end; ++q) partial += grad_row[q] * in[base + q * s.stride_w];
              sum += partial;
            }
          }
          float& out = dw[((k * g.in_group + ci) * s.r + r) * s.s + t];
          out = static_cast<float>(accumulate ? out + sum : sum);
        }
  }
}

}  // namespace mplan::rt::cpu
