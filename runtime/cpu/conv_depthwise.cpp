// Depthwise convolution planes with AVX-512 (runtime/cpu/conv_depthwise.h).

#include "runtime/cpu/conv_depthwise.h"
#include "runtime/cpu/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MPLAN_X86_AVX512 1
#endif

namespace mplan::rt::cpu {

DepthwiseRanges::DepthwiseRanges(const ConvShape& sh) : P(sh.p()), Q(sh.q()) {
  for (int64_t r = 0; r < sh.r && r < kDepthwiseMaxTapsPerAxis; ++r)
    rows[r] = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
  for (int64_t s = 0; s < sh.s && s < kDepthwiseMaxTapsPerAxis; ++s)
    cols[s] = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
}

#ifdef MPLAN_X86_AVX512

namespace {

constexpr int64_t kMaxZeroRow = 1024 + 128;  // floats in the zero row (see below)

bool cpu_has_avx512() {
  return kernel_isa() == Isa::avx512;
}

// Bits [lo, hi) of a 16-lane mask for the columns q0 .. q0+15.
inline __mmask16 lanes(int64_t lo, int64_t hi, int64_t q0) {
  lo = lo - q0 < 0 ? 0 : lo - q0;
  hi = hi - q0 > 16 ? 16 : hi - q0;
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

// 16 input values x[(q0 + i) * stride] for the lanes in mask (0 elsewhere); x points
// at the input row, already offset by the tap's column minus the padding.
template <int kStride>
__attribute__((target("avx512f,bmi2"))) inline __m512 load_columns(const float* x, int64_t q0, __mmask16 mask) {
  if constexpr (kStride == 1) {
    return _mm512_maskz_loadu_ps(mask, x + q0);
  } else {
    // Stride 2: the even lanes of 32 consecutive values.
    const __mmask32 wide = _pdep_u32(mask, 0x55555555u);
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(wide), x + 2 * q0);
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(wide >> 16), x + 2 * q0 + 16);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, even, hi);
  }
}

// The sum of the 16 lanes, in a fixed order (GCC 12 warns spuriously on the
// shuffle intrinsics a fold would use).
__attribute__((target("avx512f"))) inline float lane_sum(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float total = 0;
  for (float x : lane) total += x;
  return total;
}

}  // namespace

bool depthwise_avx512(ConvDirection direction, const ConvShape& sh) {
  if (!cpu_has_avx512() || sh.r > kDepthwiseMaxTapsPerAxis || sh.s > kDepthwiseMaxTapsPerAxis) return false;
  // The zero row stands in for rows outside the input: as wide as any row read.
  if (sh.w + 2 * sh.pad_w + 64 > kMaxZeroRow || sh.q() + 2 * sh.pad_w + 64 > kMaxZeroRow) return false;
  switch (direction) {
    case ConvDirection::forward: return sh.stride_w == 1 || sh.stride_w == 2;
    case ConvDirection::backward_data: return sh.stride_h == 1 && sh.stride_w == 1;
    case ConvDirection::backward_filter: return sh.stride_h == 1 && sh.stride_w == 1;
  }
  return false;
}

namespace {

// Rows are computed 8 at a time, one register each, so that the taps' FMAs form 8
// independent chains instead of one (an FMA's latency is 4 cycles, its throughput 2
// per cycle).
constexpr int64_t kRowBlock = 8;

// Rows are read through a table of 8 row pointers per filter row; a row outside the
// input points at a row of zeros, so the loop over the block's rows has no branch and
// no per-row mask (the padding columns are masked per filter column).

template <int kStride>
__attribute__((target("avx512f,bmi2"))) void forward_planes(const ConvShape& sh, const DepthwiseRanges& ranges,
                                                            const float* xp, const float* wk, float* yp,
                                                            bool accumulate) {
  alignas(64) static const float zero_row[kMaxZeroRow] = {};
  const int64_t P = ranges.P, Q = ranges.Q, W = sh.w, row_step = sh.stride_h * W;
  const int64_t R = sh.r, S = sh.s;
  for (int64_t p0 = 0; p0 < P; p0 += kRowBlock) {
    const int64_t rows = P - p0 < kRowBlock ? P - p0 : kRowBlock;
    for (int64_t q0 = 0; q0 < Q; q0 += 16) {
      const __mmask16 out = lanes(0, Q, q0);
      __m512 acc[kRowBlock];
#pragma GCC unroll 8
      for (int64_t i = 0; i < kRowBlock; ++i)
        acc[i] = accumulate && i < rows ? _mm512_maskz_loadu_ps(out, yp + (p0 + i) * Q + q0) : _mm512_setzero_ps();
      for (int64_t r = 0; r < R; ++r) {
        const OutputRange ok = ranges.rows[r];
        const float* first = xp + (p0 * sh.stride_h - sh.pad_h + r) * W - sh.pad_w + q0 * kStride;
        const float* row[kRowBlock];
#pragma GCC unroll 8
        for (int64_t i = 0; i < kRowBlock; ++i)
          row[i] = p0 + i >= ok.lo && p0 + i < ok.hi ? first + i * row_step : zero_row + 32;
        for (int64_t s = 0; s < S; ++s) {
          const __mmask16 m = out & lanes(ranges.cols[s].lo, ranges.cols[s].hi, q0);
          const __m512 wv = _mm512_set1_ps(wk[r * S + s]);
#pragma GCC unroll 8
          for (int64_t i = 0; i < kRowBlock; ++i)
            acc[i] = _mm512_fmadd_ps(wv, load_columns<kStride>(row[i] + s, 0, m), acc[i]);
        }
      }
#pragma GCC unroll 8
      for (int64_t i = 0; i < kRowBlock; ++i)
        if (i < rows) _mm512_mask_storeu_ps(yp + (p0 + i) * Q + q0, out, acc[i]);
    }
  }
}

}  // namespace

void depthwise_forward_avx512(const ConvShape& sh, const DepthwiseRanges& ranges, const float* xp, const float* wk,
                              float* yp, bool accumulate) {
  if (sh.stride_w == 1) {
    forward_planes<1>(sh, ranges, xp, wk, yp, accumulate);
  } else {
    forward_planes<2>(sh, ranges, xp, wk, yp, accumulate);
  }
}

// Stride 1: dx[ih][iw] += sum over taps of w[r][s] * dy[ih + pad_h - r][iw + pad_w - s]
// (0 outside dy): the forward's structure with the taps rotated, 8 rows of dx at a time.
__attribute__((target("avx512f,bmi2"))) void depthwise_backward_data_avx512(const ConvShape& sh,
                                                                            const DepthwiseRanges& ranges,
                                                                            const float* dyp, const float* wk,
                                                                            float* dxp) {
  alignas(64) static const float zero_row[kMaxZeroRow] = {};
  const int64_t P = ranges.P, Q = ranges.Q, W = sh.w, R = sh.r, S = sh.s;
  for (int64_t h0 = 0; h0 < sh.h; h0 += kRowBlock) {
    const int64_t rows = sh.h - h0 < kRowBlock ? sh.h - h0 : kRowBlock;
    for (int64_t iw0 = 0; iw0 < W; iw0 += 16) {
      const __mmask16 out = lanes(0, W, iw0);
      __m512 acc[kRowBlock];
#pragma GCC unroll 8
      for (int64_t i = 0; i < kRowBlock; ++i)
        acc[i] = i < rows ? _mm512_maskz_loadu_ps(out, dxp + (h0 + i) * W + iw0) : _mm512_setzero_ps();
      for (int64_t r = 0; r < R; ++r) {
        const float* row[kRowBlock];
#pragma GCC unroll 8
        for (int64_t i = 0; i < kRowBlock; ++i) {
          const int64_t p = h0 + i + sh.pad_h - r;
          row[i] = p >= 0 && p < P ? dyp + p * Q + sh.pad_w + iw0 : zero_row + 32;
        }
        for (int64_t s = 0; s < S; ++s) {
          // q = iw + pad_w - s must lie in [0, Q): iw in [s - pad_w, Q + s - pad_w).
          const __mmask16 m = out & lanes(s - sh.pad_w, Q + s - sh.pad_w, iw0);
          const __m512 wv = _mm512_set1_ps(wk[r * S + s]);
#pragma GCC unroll 8
          for (int64_t i = 0; i < kRowBlock; ++i)
            acc[i] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, row[i] - s), acc[i]);
        }
      }
#pragma GCC unroll 8
      for (int64_t i = 0; i < kRowBlock; ++i)
        if (i < rows) _mm512_mask_storeu_ps(dxp + (h0 + i) * W + iw0, out, acc[i]);
    }
  }
}

// Per tap, 4 accumulators in turn over the output rows (independent chains).
__attribute__((target("avx512f,bmi2"))) void depthwise_filter_avx512(const ConvShape& sh,
                                                                     const DepthwiseRanges& ranges, const float* xp,
                                                                     const float* dyp, float* sums) {
  const int64_t Q = ranges.Q;
  for (int64_t r = 0; r < sh.r; ++r) {
    const OutputRange ok = ranges.rows[r];
    for (int64_t s = 0; s < sh.s; ++s) {
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int64_t q0 = 0; q0 < Q; q0 += 16) {
        const __mmask16 out = lanes(0, Q, q0);
        const __mmask16 m = out & lanes(ranges.cols[s].lo, ranges.cols[s].hi, q0);
        const float* x0 = xp + (-sh.pad_h + r) * sh.w - sh.pad_w + s + q0;
        const float* g0 = dyp + q0;
        int64_t p = ok.lo;
        for (; p + 4 <= ok.hi; p += 4) {
#pragma GCC unroll 4
          for (int64_t i = 0; i < 4; ++i)
            acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(out, g0 + (p + i) * Q),
                                     _mm512_maskz_loadu_ps(m, x0 + (p + i) * sh.w), acc[i]);
        }
        for (; p < ok.hi; ++p)
          acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(out, g0 + p * Q), _mm512_maskz_loadu_ps(m, x0 + p * sh.w),
                                   acc[0]);
      }
      sums[r * sh.s + s] = lane_sum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
    }
  }
}

#else  // no AVX-512 kernels on this compiler or CPU family

bool depthwise_avx512(ConvDirection, const ConvShape&) { return false; }
void depthwise_forward_avx512(const ConvShape&, const DepthwiseRanges&, const float*, const float*, float*, bool) {}
void depthwise_backward_data_avx512(const ConvShape&, const DepthwiseRanges&, const float*, const float*, float*) {}
void depthwise_filter_avx512(const ConvShape&, const DepthwiseRanges&, const float*, const float*, float*) {}

#endif

}  // namespace mplan::rt::cpu
