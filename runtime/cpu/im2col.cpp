// Rows of an implicit im2col matrix (runtime/cpu/im2col.h).

#include "runtime/cpu/im2col.h"
#include "runtime/cpu/isa.h"

#include <algorithm>

#include "runtime/cpu/vectorize.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MPLAN_X86_AVX512 1
#endif

namespace mplan::rt::cpu {
namespace {

bool cpu_has_avx512() {
#ifdef MPLAN_X86_AVX512
  return kernel_isa() == Isa::avx512;
#else
  return false;
#endif
}

// A run of consecutive pixels of a panel along one grid row of one image.
struct Run {
  int64_t first;      // the run's first pixel, relative to the panel
  int64_t len;
  int64_t n, row, x0;  // image, grid row and first grid column
};

int64_t split_runs(const Im2colSource& src, int64_t j, int64_t len, Run* runs) {
  const int64_t per_image = src.grid_h * src.grid_w;
  int64_t n = j / per_image, row = j % per_image / src.grid_w, x = j % src.grid_w;
  int64_t made = 0;
  for (int64_t at = 0; at < len;) {
    const int64_t run = std::min(len - at, src.grid_w - x);
    runs[made++] = {at, run, n, row, x};
    at += run;
    x = 0;
    if (++row == src.grid_h) {
      row = 0;
      ++n;
    }
  }
  return made;
}

// Any stride and shape: per tap, per run, a zeroed head and tail and a copy between.
MPLAN_VECTOR_CLONES void generic_rows(const Im2colSource& src, const OutputRange* rows_ok, const OutputRange* cols_ok,
                                      const Run* runs, int64_t run_count, const Im2colTap* taps, int64_t count,
                                      int64_t len, float* dst, int64_t dst_stride, int64_t width) {
  for (int64_t i = 0; i < count; ++i) {
    const Im2colTap& tap = taps[i];
    const OutputRange rows = rows_ok[tap.r], cols = cols_ok[tap.s];
    float* d = dst + i * dst_stride;
    for (int64_t k = 0; k < run_count; ++k) {
      const Run& run = runs[k];
      float* dd = d + run.first - run.x0;  // dd[ow] is the value at grid column ow
      const int64_t end = run.x0 + run.len;
      if (run.row < rows.lo || run.row >= rows.hi) {
        for (int64_t ow = run.x0; ow < end; ++ow) dd[ow] = 0.0f;
        continue;
      }
      const float* row = src.data + run.n * src.image_floats + tap.channel_offset +
                         (run.row * src.stride_h - src.pad_h + tap.r) * src.w - src.pad_w + tap.s;
      const int64_t lo = std::clamp(cols.lo, run.x0, end), hi = std::clamp(cols.hi, lo, end);
      for (int64_t ow = run.x0; ow < lo; ++ow) dd[ow] = 0.0f;
      if (src.stride_w == 1) {
        for (int64_t ow = lo; ow < hi; ++ow) dd[ow] = row[ow];
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) dd[ow] = row[ow * src.stride_w];
      }
      for (int64_t ow = hi; ow < end; ++ow) dd[ow] = 0.0f;
    }
    for (int64_t t = len; t < width; ++t) d[t] = 0.0f;
  }
}

#ifdef MPLAN_X86_AVX512
// Contiguous panels: masked loads never fault on the lanes they leave out, so the
// source pointer may run past the image where the mask is zero.
__attribute__((target("avx512f"))) void masked_rows(const float* base, int64_t w, int64_t pad_h, int64_t pad_w,
                                                      const uint32_t* row_ok, const uint32_t* col_ok,
                                                      const Im2colTap* taps, int64_t count, float* dst,
                                                      int64_t dst_stride, int64_t width) {
  for (int64_t i = 0; i < count; ++i) {
    const Im2colTap& tap = taps[i];
    const float* src = base + tap.channel_offset + (tap.r - pad_h) * w + (tap.s - pad_w);
    const uint32_t mask = row_ok[tap.r] & col_ok[tap.s];
    float* d = dst + i * dst_stride;
    _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), src));
    if (width == 32) _mm512_storeu_ps(d + 16, _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), src + 16));
  }
}
#endif

}  // namespace

Im2colPacker::Im2colPacker(const Im2colSource& src, int64_t taps_h, int64_t taps_w)
    : src_(src), taps_h_(taps_h), taps_w_(taps_w) {
  contiguous_ = cpu_has_avx512() && src.stride_h == 1 && src.stride_w == 1 && src.w == src.grid_w;
  pointwise_ = taps_h == 1 && taps_w == 1 && src.stride_h == 1 && src.stride_w == 1 && src.pad_h == 0 &&
               src.pad_w == 0 && src.h == src.grid_h && src.w == src.grid_w;
  for (int64_t r = 0; r < taps_h; ++r) rows_ok_[r] = valid_outputs(r, src.h, src.stride_h, src.pad_h, src.grid_h);
  for (int64_t s = 0; s < taps_w; ++s) cols_ok_[s] = valid_outputs(s, src.w, src.stride_w, src.pad_w, src.grid_w);
}

void Im2colPacker::rows(const Im2colTap* taps, int64_t count, int64_t j, int64_t len, float* dst,
                        int64_t dst_stride, int64_t width) const {
  const int64_t per_image = src_.grid_h * src_.grid_w;
  if (pointwise_) {
    // A 1x1 filter at stride 1 without padding: the row is the channel's plane, a
    // contiguous copy per image.
    for (int64_t i = 0; i < count; ++i) {
      float* d = dst + i * dst_stride;
      int64_t n = j / per_image, pixel = j % per_image;
      for (int64_t at = 0; at < len;) {
        const int64_t run = std::min(len - at, per_image - pixel);
        std::copy_n(src_.data + n * src_.image_floats + taps[i].channel_offset + pixel, run, d + at);
        at += run;
        pixel = 0;
        ++n;
      }
      std::fill(d + len, d + width, 0.0f);
    }
    return;
  }
#ifdef MPLAN_X86_AVX512
  if (contiguous_ && j / per_image == (j + len - 1) / per_image) {
    uint32_t row_ok[kMaxTaps], col_ok[kMaxTaps];
    tap_masks(j, len, row_ok, col_ok);
    const int64_t pixel = j % per_image;
    // Pixel (oh, ow) of the grid reads source offset oh*w + ow + (r - pad_h)*w + s - pad_w.
    const float* base = src_.data + j / per_image * src_.image_floats + pixel;
    masked_rows(base, src_.w, src_.pad_h, src_.pad_w, row_ok, col_ok, taps, count, dst, dst_stride, width);
    return;
  }
#endif
  Run runs[kMaxPanel];
  const int64_t run_count = split_runs(src_, j, len, runs);
  generic_rows(src_, rows_ok_, cols_ok_, runs, run_count, taps, count, len, dst, dst_stride, width);
}

namespace {

// Bits [a, b) of a 32-bit mask, clamped to [0, 32).
uint32_t bit_range(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0);
  b = std::min<int64_t>(b, 32);
  if (b <= a) return 0;
  const uint32_t upto_b = b == 32 ? ~0u : (1u << b) - 1u;
  return upto_b & ~((1u << a) - 1u);
}

}  // namespace

void Im2colPacker::tap_masks(int64_t j, int64_t len, uint32_t* row_ok, uint32_t* col_ok) const {
  const int64_t W = src_.grid_w, pixel = j % (src_.grid_h * W);
  // Pixels are row-major, so a tap row's valid pixels are one range of the panel.
  for (int64_t r = 0; r < taps_h_; ++r)
    row_ok[r] = bit_range(rows_ok_[r].lo * W - pixel, std::min(rows_ok_[r].hi * W - pixel, len));
  // A tap column's valid pixels: one range per grid row the panel crosses.
  for (int64_t s = 0; s < taps_w_; ++s) {
    uint32_t mask = 0;
    for (int64_t t = 0, x = pixel % W; t < len; x = 0) {
      const int64_t seg = std::min(len - t, W - x);
      const int64_t lo = std::max(x, cols_ok_[s].lo), hi = std::min(x + seg, cols_ok_[s].hi);
      if (hi > lo) mask |= bit_range(t + lo - x, t + hi - x);
      t += seg;
    }
    col_ok[s] = mask;
  }
}

}  // namespace mplan::rt::cpu
