// The "direct" convolution: the seven nested loops of mu-cuDNN Algorithm 1, with
// no workspace (cuDNN's IMPLICIT_GEMM / ALGO_0 family). The reference the other
// algorithms are tested against. Layers other than depthwise ones run
// conv_general.cpp's loops, which sum in double.
//
// Depthwise layers (one input channel per group, MobileNet's 3x3 convs) take their
// own path: per image plane, each filter tap is one loop along an output row, which
// vectorises at stride 1 (runtime/cpu/vectorize.h), or with AVX-512 a register per
// 16 columns (runtime/cpu/conv_depthwise.h); the filter gradient sums each tap over a
// plane in float lanes and adds the planes' sums image by image.

#include <algorithm>
#include <cstring>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/conv_depthwise.h"
#include "runtime/cpu/conv_window.h"
#include "runtime/cpu/vectorize.h"

namespace mplan::rt::cpu {
namespace {

bool depthwise(const ConvShape& sh) { return sh.c == sh.groups; }

constexpr int64_t kMaxTaps = 121;  // taps per pass of the depthwise filter gradient (11 x 11)
using TapRanges = DepthwiseRanges;

// The depthwise path: one input channel per group and a filter of at most 32 x 32.
bool depthwise_path(const ConvShape& sh) {
  return depthwise(sh) && sh.r <= kDepthwiseMaxTapsPerAxis && sh.s <= kDepthwiseMaxTapsPerAxis;
}

// y_plane (P x Q) (+)= the depthwise convolution of x_plane (h x w) by the r x s filter wk.
MPLAN_VECTOR_CLONES void depthwise_plane_forward(const ConvShape& sh, const TapRanges& ranges, const float* __restrict xp,
                                                 const float* __restrict wk, float* __restrict yp, bool accumulate) {
  const int64_t P = ranges.P, Q = ranges.Q;
  if (!accumulate) std::memset(yp, 0, sizeof(float) * P * Q);
  for (int64_t r = 0; r < sh.r; ++r) {
    const OutputRange ps = ranges.rows[r];
    for (int64_t s = 0; s < sh.s; ++s) {
      const OutputRange qs = ranges.cols[s];
      const float wv = wk[r * sh.s + s];
      for (int64_t p = ps.lo; p < ps.hi; ++p) {
        const float* xrow = xp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
        float* yrow = yp + p * Q;
        if (sh.stride_w == 1) {
          for (int64_t q = qs.lo; q < qs.hi; ++q) yrow[q] += wv * xrow[q];
        } else {
          for (int64_t q = qs.lo; q < qs.hi; ++q) yrow[q] += wv * xrow[q * sh.stride_w];
        }
      }
    }
  }
}

// dx_plane (h x w) += the transposed depthwise convolution of dy_plane (P x Q) by wk.
MPLAN_VECTOR_CLONES void depthwise_plane_backward_data(const ConvShape& sh, const TapRanges& ranges, const float* __restrict dyp,
                                                       const float* __restrict wk, float* __restrict dxp) {
  const int64_t Q = ranges.Q;
  for (int64_t r = 0; r < sh.r; ++r) {
    const OutputRange ps = ranges.rows[r];
    for (int64_t s = 0; s < sh.s; ++s) {
      const OutputRange qs = ranges.cols[s];
      const float wv = wk[r * sh.s + s];
      for (int64_t p = ps.lo; p < ps.hi; ++p) {
        float* dxrow = dxp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
        const float* dyrow = dyp + p * Q;
        if (sh.stride_w == 1) {
          for (int64_t q = qs.lo; q < qs.hi; ++q) dxrow[q] += wv * dyrow[q];
        } else {
          for (int64_t q = qs.lo; q < qs.hi; ++q) dxrow[q * sh.stride_w] += wv * dyrow[q];
        }
      }
    }
  }
}

// sums[t] = sum over the plane of dy * x shifted by filter tap t, for taps [0, r*s).
MPLAN_VECTOR_CLONES void depthwise_plane_filter(const ConvShape& sh, const TapRanges& ranges, const float* __restrict xp,
                                                const float* __restrict dyp, float* __restrict sums) {
  const int64_t Q = ranges.Q;
  for (int64_t r = 0; r < sh.r; ++r) {
    const OutputRange ps = ranges.rows[r];
    for (int64_t s = 0; s < sh.s; ++s) {
      const OutputRange qs = ranges.cols[s];
      float lanes[8] = {};
      for (int64_t p = ps.lo; p < ps.hi; ++p) {
        const float* xrow = xp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
        const float* dyrow = dyp + p * Q;
        int64_t q = qs.lo;
        if (sh.stride_w == 1) {
          for (; q + 8 <= qs.hi; q += 8)
            for (int64_t j = 0; j < 8; ++j) lanes[j] += dyrow[q + j] * xrow[q + j];
        }
        for (; q < qs.hi; ++q) lanes[q % 8] += dyrow[q] * xrow[q * sh.stride_w];
      }
      float total = 0;
      for (float v : lanes) total += v;
      sums[r * sh.s + s] = total;
    }
  }
}

}  // namespace

void conv_forward_direct(const ConvShape& sh, const float* x, const float* w, float* y,
                         bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  const int64_t kg = sh.k / sh.groups;
  if (depthwise_path(sh)) {
    const TapRanges ranges(sh);
    const auto plane = depthwise_avx512(ConvDirection::forward, sh) ? depthwise_forward_avx512 : depthwise_plane_forward;
    for (int64_t n = 0; n < sh.n; ++n)
      for (int64_t k = 0; k < sh.k; ++k)
        plane(sh, ranges, x + (n * sh.c + k / kg) * sh.h * sh.w, w + k * sh.r * sh.s,
                                y + (n * sh.k + k) * P * Q, accumulate);
    return;
  }
  conv_forward_general(sh, x, w, y, accumulate);
}

void conv_backward_data_direct(const ConvShape& sh, const float* w, const float* dy, float* dx,
                               bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q();
  const int64_t kg = sh.k / sh.groups;
  if (depthwise_path(sh)) {
    if (!accumulate) std::memset(dx, 0, sizeof(float) * sh.x_elements());
    const TapRanges ranges(sh);
    const auto plane = depthwise_avx512(ConvDirection::backward_data, sh) ? depthwise_backward_data_avx512
                                                                          : depthwise_plane_backward_data;
    for (int64_t n = 0; n < sh.n; ++n)
      for (int64_t k = 0; k < sh.k; ++k)
        plane(sh, ranges, dy + (n * sh.k + k) * P * Q, w + k * sh.r * sh.s,
                                      dx + (n * sh.c + k / kg) * sh.h * sh.w);
    return;
  }
  conv_backward_data_general(sh, w, dy, dx, accumulate);
}

void conv_backward_filter_direct(const ConvShape& sh, const float* x, const float* dy, float* dw,
                                 bool accumulate) {
  const int64_t P = sh.p(), Q = sh.q(), RS = sh.r * sh.s;
  const int64_t kg = sh.k / sh.groups;
  if (depthwise_path(sh) && RS <= kMaxTaps) {
    const TapRanges ranges(sh);
    const auto plane_sums =
        depthwise_avx512(ConvDirection::backward_filter, sh) ? depthwise_filter_avx512 : depthwise_plane_filter;
    // Image by image in memory order (channel by channel would stride across images),
    // each plane's tap sums added to dw.
    float plane[kMaxTaps];
    for (int64_t n = 0; n < sh.n; ++n)
      for (int64_t k = 0; k < sh.k; ++k) {
        plane_sums(sh, ranges, x + (n * sh.c + k / kg) * sh.h * sh.w, dy + (n * sh.k + k) * P * Q, plane);
        float* dwp = dw + k * RS;
        if (n == 0 && !accumulate) {
          for (int64_t t = 0; t < RS; ++t) dwp[t] = plane[t];
        } else {
          for (int64_t t = 0; t < RS; ++t) dwp[t] += plane[t];
        }
      }
    return;
  }
  conv_backward_filter_general(sh, x, dy, dw, accumulate);
}

}  // namespace mplan::rt::cpu
