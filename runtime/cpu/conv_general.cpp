// The direct convolution of any shape but a depthwise one (conv_direct.cpp has
// that path): groups, strides, zero padding and dilation, no workspace. It is
// the "direct" algorithm of every non-depthwise layer, the only algorithm of
// dilated layers, and the fallback of every other algorithm whose workspace
// does not fit, so it is the CPU reference's last word on accuracy.
//
// Every sum is kept in double until its result is stored as float: an output
// row over all input channels and taps (forward), an input row over all output
// channels and taps (backward-data), a filter tap over all images and output
// positions (backward-filter). A float running sum over a 512-channel 3x3
// layer's 4,608 products was 3 to 5 times less accurate than PyTorch's fp32
// convolutions, and batch norm's backward pass turned that into weight
// gradients far outside PyTorch's fp32 envelope against float64
// (docs/generated-program.md, "Accuracy of the CPU reference").

#include <algorithm>

#include "runtime/cpu/conv_kernels.h"

namespace mplan::rt::cpu {
namespace {

// Columns of one output (or input) row summed at a time, in a stack buffer.
constexpr int64_t kRowBlock = 512;

// The output columns q whose input column q*stride - pad + offset lies in
// [first_column, end_column).
struct ColumnRange {
  int64_t first = 0, end = 0;  // [first, end)
};
ColumnRange valid_columns(int64_t first_column, int64_t end_column, int64_t out_width, int64_t stride, int64_t pad,
                          int64_t offset) {
  // q*stride >= first_column + pad - offset and q*stride <= end_column - 1 + pad - offset.
  const int64_t low = first_column + pad - offset, high = end_column - 1 + pad - offset;
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

// Dilated shapes only; depthwise ones run conv_direct.cpp's path.
bool conv_takes_general_path(const ConvShape& s) { return s.dilation_h != 1 || s.dilation_w != 1; }

void conv_forward_general(const ConvShape& s, const float* x, const float* w, float* y, bool accumulate) {
  const Geometry g = geometry(s);
  double sums[kRowBlock];
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t k = 0; k < s.k; ++k) {
      float* out = y + (b * s.k + k) * g.p * g.q;
      const int64_t first_channel = (k / g.out_group) * g.in_group;
      for (int64_t p = 0; p < g.p; ++p)
        for (int64_t q0 = 0; q0 < g.q; q0 += kRowBlock) {
          const int64_t q1 = std::min(g.q, q0 + kRowBlock);
          float* out_row = out + p * g.q;
          for (int64_t q = q0; q < q1; ++q) sums[q - q0] = accumulate ? out_row[q] : 0.0;
          for (int64_t ci = 0; ci < g.in_group; ++ci) {
            const float* in = x + (b * s.c + first_channel + ci) * s.h * s.w;
            const float* taps = w + (k * g.in_group + ci) * s.r * s.s;
            for (int64_t r = 0; r < s.r; ++r) {
              const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              for (int64_t t = 0; t < s.s; ++t) {
                const ColumnRange cols = valid_columns(0, s.w, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
                const int64_t first = std::max(cols.first, q0), end = std::min(cols.end, q1);
                const double tap = taps[r * s.s + t];
                const float* in_row = in + ih * s.w - s.pad_w + t * s.dilation_w;  // + q*stride: on the row
                double* row = sums - q0;
                for (int64_t q = first; q < end; ++q) row[q] += tap * in_row[q * s.stride_w];
              }
            }
          }
          for (int64_t q = q0; q < q1; ++q) out_row[q] = static_cast<float>(sums[q - q0]);
        }
    }
}

// Each input row gathers what every output row it feeds sends back: for tap
// row r the output row p with p*stride_h - pad_h + r*dilation_h = ih.
void conv_backward_data_general(const ConvShape& s, const float* w, const float* dy, float* dx, bool accumulate) {
  const Geometry g = geometry(s);
  double sums[kRowBlock];
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t c = 0; c < s.c; ++c) {
      float* in = dx + (b * s.c + c) * s.h * s.w;
      const int64_t group = c / g.in_group, ci = c % g.in_group;
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t w0 = 0; w0 < s.w; w0 += kRowBlock) {
          const int64_t w1 = std::min(s.w, w0 + kRowBlock);
          float* in_row = in + ih * s.w;
          for (int64_t iw = w0; iw < w1; ++iw) sums[iw - w0] = accumulate ? in_row[iw] : 0.0;
          for (int64_t r = 0; r < s.r; ++r) {
            const int64_t shifted = ih + s.pad_h - r * s.dilation_h;  // p * stride_h
            if (shifted < 0 || shifted % s.stride_h != 0 || shifted / s.stride_h >= g.p) continue;
            const int64_t p = shifted / s.stride_h;
            for (int64_t ko = 0; ko < g.out_group; ++ko) {
              const int64_t k = group * g.out_group + ko;
              const float* grad_row = dy + ((b * s.k + k) * g.p + p) * g.q;
              const float* taps = w + (k * g.in_group + ci) * s.r * s.s;
              for (int64_t t = 0; t < s.s; ++t) {
                const ColumnRange cols = valid_columns(w0, w1, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
                const double tap = taps[r * s.s + t];
                double* row = sums - w0 - s.pad_w + t * s.dilation_w;  // row[q*stride] is column q*stride - pad + offset
                for (int64_t q = cols.first; q < cols.end; ++q) row[q * s.stride_w] += tap * grad_row[q];
              }
            }
          }
          for (int64_t iw = w0; iw < w1; ++iw) in_row[iw] = static_cast<float>(sums[iw - w0]);
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
          const ColumnRange cols = valid_columns(0, s.w, g.q, s.stride_w, s.pad_w, t * s.dilation_w);
          double sum = 0.0;
          for (int64_t b = 0; b < s.n; ++b) {
            const float* in = x + (b * s.c + first_channel + ci) * s.h * s.w;
            const float* grad = dy + (b * s.k + k) * g.p * g.q;
            for (int64_t p = 0; p < g.p; ++p) {
              const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              const float* in_row = in + ih * s.w - s.pad_w + t * s.dilation_w;
              const float* grad_row = grad + p * g.q;
              for (int64_t q = cols.first; q < cols.end; ++q)
                sum += static_cast<double>(grad_row[q]) * in_row[q * s.stride_w];
            }
          }
          float& out = dw[((k * g.in_group + ci) * s.r + r) * s.s + t];
          out = static_cast<float>(accumulate ? out + sum : sum);
        }
  }
}

}  // namespace mplan::rt::cpu
