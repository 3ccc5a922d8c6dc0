#pragma once
// Depthwise convolution planes with AVX-512 (runtime/cpu/conv_direct.cpp's depthwise
// path uses these when the CPU has it): each output row is computed 16 columns at a
// time in one register, every filter tap a masked load of the input row (the mask
// zeroes the padding, so no bounds are checked per element) and one FMA. A plane of
// MobileNet's late layers (4 x 4, 2 x 2) is then a handful of instructions instead
// of dozens of short loops.

#include <cstdint>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/conv_window.h"

namespace mplan::rt::cpu {

inline constexpr int64_t kDepthwiseMaxTapsPerAxis = 32;

// The valid output rows of each filter row and columns of each filter column, worked
// out once per call.
struct DepthwiseRanges {
  int64_t P, Q;  // the output plane
  OutputRange rows[kDepthwiseMaxTapsPerAxis], cols[kDepthwiseMaxTapsPerAxis];
  explicit DepthwiseRanges(const ConvShape& sh);
};

// Whether the AVX-512 planes below run this shape on this CPU (forward: stride 1 or
// 2 along w; backward-data and backward-filter: stride 1).
bool depthwise_avx512(ConvDirection direction, const ConvShape& sh);

// y_plane (+)= the depthwise convolution of x_plane by the filter wk.
void depthwise_forward_avx512(const ConvShape& sh, const DepthwiseRanges& ranges, const float* xp, const float* wk,
                              float* yp, bool accumulate);
// dx_plane += the transposed convolution of dy_plane by wk.
void depthwise_backward_data_avx512(const ConvShape& sh, const DepthwiseRanges& ranges, const float* dyp,
                                    const float* wk, float* dxp);
// sums[t] = sum over the plane of dy * (x shifted by tap t), t in [0, r*s).
void depthwise_filter_avx512(const ConvShape& sh, const DepthwiseRanges& ranges, const float* xp, const float* dyp,
                             float* sums);

}  // namespace mplan::rt::cpu
