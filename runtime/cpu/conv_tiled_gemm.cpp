// The "tiled_gemm" convolutions: every direction as one blocked GEMM per group
// over the whole (micro-)batch (runtime/cpu/gemm_driver.h), with the operands packed
// tile by tile straight from the tensors (an implicit im2col): no column matrix, so
// the workspace is the two packing buffers (at most 1.1 MiB; 44 KiB for
// "tiled_gemm_small") whatever the batch. cuDNN's IMPLICIT_PRECOMP_GEMM is the GPU's
// analogue; the batch-wide GEMM is what oneDNN's and cuDNN's kernels do where the
// per-image "gemm" runs one small product per image.
//
// With g the group, Cg = c/groups, Kg = k/groups, RS = r*s, and columns running over
// the pixels of every image of the batch:
//   forward          y_g  (Kg x n*P*Q)    = W_g (Kg x Cg*RS)  * im2col(x)_g (Cg*RS x n*P*Q)
//   backward-data    dx_g (Cg x n*H*W)    = W_g^T, as [c][(k, r, s)] (Cg x Kg*RS)
//                                           * col(dy)_g (Kg*RS x n*H*W)
//   backward-filter  dW_g (Kg x Cg*RS)   += dy_g (Kg x n*P*Q) * im2col(x)_g^T (n*P*Q x Cg*RS),
//                    an "NT" product of rows that are both contiguous along the pixels, by
//                    the dot-product kernel (no transposes)
// where col(dy)[(k, r, s)][(n, ih, iw)] = dy[n, k, ih + pad - r, iw + pad - s] (0
// outside): the transposed convolution as a gather, so each dx element is written
// once (the im2col of dy padded by r-1-pad, with the filter rotated). That holds at
// stride 1; a strided layer's backward-data is instead
//   col_g (Cg*RS x n*P*Q) = W_g^T (Cg*RS x Kg) * dy_g (Kg x n*P*Q)
// with each finished tile of col added into dx where it belongs (col2im on the fly).

#include <algorithm>
#include <cstring>

#include "runtime/check.h"
#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/conv_window.h"
#include "runtime/cpu/gemm_driver.h"
#include "runtime/cpu/im2col.h"

namespace mplan::rt::cpu {
namespace {

constexpr int64_t kMaxDepth = 512;  // the blockings' kc bound (GEMM) and nc bound (NT): tables on the stack
constexpr int64_t kMaxPanelCols = 32;

GemmBlocking blocking_of(ConvAlgo algo) {
  GemmBlocking b;
  if (algo == ConvAlgo::tiled_gemm_small) {
    b.mc = 24;
    b.kc = 128;
    b.nc = 64;
  }
  return b;
}

GemmNtBlocking nt_blocking_of(ConvAlgo algo) {
  GemmNtBlocking b;
  if (algo == ConvAlgo::tiled_gemm_small) {
    b.mc = 32;
    b.nc = 32;
    b.kc = 128;
  }
  return b;
}

bool unit_stride(const ConvShape& sh) { return sh.stride_h == 1 && sh.stride_w == 1; }

// Backward-data by the transposed-convolution gather: stride 1 and pad <= r - 1.
bool gather_backward_data(const ConvShape& sh) {
  return unit_stride(sh) && sh.pad_h <= sh.r - 1 && sh.pad_w <= sh.s - 1;
}

// A run of consecutive columns that lie in one row of one image of a column grid
// (images of `rows` x `cols` pixels, columns numbered image by image, row by row).
struct Run {
  int64_t first_col;  // index of the run's first column, relative to the panel
  int64_t len;
  int64_t n, row, x0;  // image, row and first x of the run
};

// Splits `count` columns starting at column j into runs; returns how many.
int64_t split_runs(int64_t j, int64_t count, int64_t rows, int64_t cols, Run* runs) {
  const int64_t per_image = rows * cols;
  int64_t n = j / per_image, rem = j % per_image, row = rem / cols, x = rem % cols;
  int64_t made = 0;
  for (int64_t col = 0; col < count;) {
    const int64_t len = std::min(count - col, cols - x);
    runs[made++] = {col, len, n, row, x};
    col += len;
    x += len;
    if (x == cols) {
      x = 0;
      if (++row == rows) {
        row = 0;
        ++n;
      }
    }
  }
  return made;
}

// Packs rows [i0, i0+mc) x [p0, p0+kc) of a row-major matrix a (leading dimension
// lda) into mr-row panels.
void pack_rows(const float* a, int64_t lda, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr,
               float* dst) {
  for (int64_t t = 0; t * mr < mc; ++t) {
    float* panel = dst + t * kc * mr;
    for (int64_t ii = 0; ii < mr; ++ii) {
      const int64_t i = t * mr + ii;
      if (i < mc) {
        const float* src = a + (i0 + i) * lda + p0;
        for (int64_t pp = 0; pp < kc; ++pp) panel[pp * mr + ii] = src[pp];
      } else {
        for (int64_t pp = 0; pp < kc; ++pp) panel[pp * mr + ii] = 0.0f;
      }
    }
  }
}

// Writes or adds a rows x cols tile to a batch-wide NCHW tensor: tile row i is
// channel `channel0 + i`, tile columns are the pixels j0.. of the (image, pixel) grid.
void store_nchw(const float* tile, int64_t tile_stride, int64_t rows, int64_t cols, float* out,
                int64_t channels, int64_t channel0, int64_t pixels, int64_t j0, bool add) {
  int64_t n = j0 / pixels, pixel = j0 % pixels;
  for (int64_t c0 = 0; c0 < cols;) {
    const int64_t len = std::min(cols - c0, pixels - pixel);
    for (int64_t i = 0; i < rows; ++i) {
      float* dst = out + (n * channels + channel0 + i) * pixels + pixel;
      const float* src = tile + i * tile_stride + c0;
      if (add) {
        for (int64_t t = 0; t < len; ++t) dst[t] += src[t];
      } else {
        for (int64_t t = 0; t < len; ++t) dst[t] = src[t];
      }
    }
    c0 += len;
    pixel = 0;
    ++n;
  }
}

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of an im2col matrix into nr-column
// panels; tap_of(row) gives each row's channel and tap.
template <class TapOf>
void pack_im2col_panels(const Im2colPacker& packer, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                        float* dst, TapOf&& tap_of) {
  Im2colTap taps[kMaxDepth];
  for (int64_t pp = 0; pp < kc; ++pp) taps[pp] = tap_of(p0 + pp);
  for (int64_t t = 0; t * nr < nc; ++t)
    packer.rows(taps, kc, j0 + t * nr, std::min(nr, nc - t * nr), dst + t * kc * nr, nr, nr);
}

// Packs a group's share of a batch-wide NCHW tensor seen as a (channels x n*pixels)
// matrix into nr-column panels: rows [p0, p0+kc) are channels channel0 + p0 ...
void pack_nchw_panels(const float* t, int64_t channels, int64_t channel0, int64_t pixels, int64_t p0, int64_t kc,
                      int64_t j0, int64_t nc, int64_t nr, float* dst) {
  for (int64_t tt = 0; tt * nr < nc; ++tt) {
    const int64_t cols = std::min(nr, nc - tt * nr);
    float* panel = dst + tt * kc * nr;
    for (int64_t pp = 0; pp < kc; ++pp) {
      float* d = panel + pp * nr;
      int64_t n = (j0 + tt * nr) / pixels, pixel = (j0 + tt * nr) % pixels;
      for (int64_t c0 = 0; c0 < cols;) {
        const int64_t len = std::min(cols - c0, pixels - pixel);
        std::memcpy(d + c0, t + (n * channels + channel0 + p0 + pp) * pixels + pixel, sizeof(float) * len);
        c0 += len;
        pixel = 0;
        ++n;
      }
      for (int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
    }
  }
}

// Rows [i0, i0+rows) of a group's share of a batch-wide NCHW tensor seen as a
// (channels x n*pixels) matrix, pixels [p0, p0+kc), each row at dst + i*ld, zero
// from kc to ld and for rows past `rows` up to a multiple of kDotRows.
void pack_nchw_rows(const float* t, int64_t channels, int64_t channel0, int64_t pixels, int64_t i0, int64_t rows,
                    int64_t p0, int64_t kc, int64_t ld, float* dst) {
  for (int64_t i = 0; i < round_up_to(rows, kDotRows); ++i) {
    float* d = dst + i * ld;
    int64_t filled = 0;
    if (i < rows) {
      int64_t n = p0 / pixels, pixel = p0 % pixels;
      while (filled < kc) {
        const int64_t len = std::min(kc - filled, pixels - pixel);
        std::memcpy(d + filled, t + (n * channels + channel0 + i0 + i) * pixels + pixel, sizeof(float) * len);
        filled += len;
        pixel = 0;
        ++n;
      }
    }
    std::memset(d + filled, 0, sizeof(float) * (ld - filled));
  }
}

// Adds a tile of col (rows (c, r, s) from i0, columns (n, oh, ow) from j0) into dx
// of a strided layer: col2im of the tile.
void add_col_tile(const ConvShape& sh, int64_t g, const float* tile, int64_t tile_stride, int64_t i0, int64_t rows,
                  int64_t j0, int64_t cols, float* dx) {
  const int64_t P = sh.p(), Q = sh.q(), RS = sh.r * sh.s, cg = sh.c / sh.groups;
  Run runs[kMaxPanelCols];
  const int64_t run_count = split_runs(j0, cols, P, Q, runs);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t rr = i0 + i, c = rr / RS, r = rr % RS / sh.s, s = rr % sh.s;
    const OutputRange ows = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
    const float* src = tile + i * tile_stride;
    for (int64_t k = 0; k < run_count; ++k) {
      const Run& run = runs[k];
      const int64_t ih = run.row * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      float* dxrow = dx + ((run.n * sh.c + g * cg + c) * sh.h + ih) * sh.w - sh.pad_w + s;
      const int64_t lo = std::max(ows.lo, run.x0), hi = std::min(ows.hi, run.x0 + run.len);
      for (int64_t ow = lo; ow < hi; ++ow) dxrow[ow * sh.stride_w] += src[run.first_col + ow - run.x0];
    }
  }
}

// im2col(x) of a layer: the forward's and the filter gradient's source.
Im2colSource x_source(const ConvShape& sh, const float* x) {
  return {x, sh.c * sh.h * sh.w, sh.h, sh.w, sh.p(), sh.q(), sh.stride_h, sh.stride_w, sh.pad_h, sh.pad_w};
}

// col(dy) of a stride-1 layer: the im2col of dy padded by r-1-pad over the input's grid
// (its taps rotated by the caller).
Im2colSource dy_source(const ConvShape& sh, const float* dy) {
  return {dy, sh.k * sh.p() * sh.q(), sh.p(), sh.q(), sh.h, sh.w, 1, 1, sh.r - 1 - sh.pad_h, sh.s - 1 - sh.pad_w};
}

}  // namespace

size_t conv_tiled_gemm_workspace_bytes(ConvAlgo algo, ConvDirection direction, const ConvShape& sh) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s;
  const int64_t out_pixels = sh.n * sh.p() * sh.q(), in_pixels = sh.n * sh.h * sh.w;
  const GemmBlocking b = blocking_of(algo);
  int64_t floats = 0;
  switch (direction) {
    case ConvDirection::forward: floats = gemm_workspace_floats(kg, out_pixels, cg * RS, b); break;
    case ConvDirection::backward_data:
      floats = gather_backward_data(sh) ? gemm_workspace_floats(cg, in_pixels, kg * RS, b)
                                        : gemm_workspace_floats(cg * RS, out_pixels, kg, b);
      break;
    case ConvDirection::backward_filter:
      floats = gemm_nt_workspace_floats(kg, cg * RS, out_pixels, nt_blocking_of(algo));
      break;
  }
  return sizeof(float) * static_cast<size_t>(floats);
}

void conv_forward_tiled_gemm(ConvAlgo algo, const ConvShape& sh, const float* x, const float* w, float* y,
                                float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s, depth = cg * RS;
  const int64_t PQ = sh.p() * sh.q(), HW = sh.h * sh.w;
  const Im2colPacker packer(x_source(sh, x), sh.r, sh.s);
  for (int64_t g = 0; g < sh.groups; ++g) {
    const float* wg = w + g * kg * depth;
    auto tap_of = [&](int64_t rr) {
      return Im2colTap{(g * cg + rr / RS) * HW, static_cast<int32_t>(rr % RS / sh.s), static_cast<int32_t>(rr % sh.s)};
    };
    auto pack_a = [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
      pack_rows(wg, depth, i0, mc, p0, kc, mr, dst);
    };
    auto store_c = [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
      store_nchw(tile, ts, rows, cols, y, sh.k, g * kg + i0, PQ, j0, accumulate || !first);
    };
    gemm_blocked(kg, sh.n * PQ, depth, blocking_of(algo), workspace, pack_a,
                 [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
                   pack_im2col_panels(packer, p0, kc, j0, nc, nr, dst, tap_of);
                 },
                 store_c);
  }
}

void conv_backward_data_tiled_gemm(ConvAlgo algo, const ConvShape& sh, const float* w, const float* dy, float* dx,
                                      float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s;
  const int64_t HW = sh.h * sh.w, PQ = sh.p() * sh.q();
  if (!gather_backward_data(sh)) {
    // col = W_g^T * dy_g, each tile added into dx (col2im on the fly).
    if (!accumulate) std::memset(dx, 0, sizeof(float) * sh.x_elements());
    for (int64_t g = 0; g < sh.groups; ++g) {
      const float* wg = w + g * kg * cg * RS;
      gemm_blocked(
          cg * RS, sh.n * PQ, kg, blocking_of(algo), workspace,
          // A[(c, r, s)][k] = W[g*kg + k][(c, r, s)]: for each k, a contiguous run of rows.
          [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
            for (int64_t t = 0; t * mr < mc; ++t) {
              float* panel = dst + t * kc * mr;
              const int64_t rows = std::min(mr, mc - t * mr);
              for (int64_t pp = 0; pp < kc; ++pp) {
                const float* src = wg + (p0 + pp) * cg * RS + i0 + t * mr;
                for (int64_t ii = 0; ii < rows; ++ii) panel[pp * mr + ii] = src[ii];
                for (int64_t ii = rows; ii < mr; ++ii) panel[pp * mr + ii] = 0.0f;
              }
            }
          },
          [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
            pack_nchw_panels(dy, sh.k, g * kg, PQ, p0, kc, j0, nc, nr, dst);
          },
          [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool) {
            add_col_tile(sh, g, tile, ts, i0, rows, j0, cols, dx);
          });
    }
    return;
  }
  const Im2colPacker packer(dy_source(sh, dy), sh.r, sh.s);
  for (int64_t g = 0; g < sh.groups; ++g) {
    const float* wg = w + g * kg * cg * RS;
    // A[c][(k, rs)] = W[g*kg + k][c][rs].
    auto pack_a = [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
      int64_t offset[kMaxDepth];
      for (int64_t pp = 0, k = p0 / RS, rs = p0 % RS; pp < kc; ++pp) {
        offset[pp] = k * cg * RS + rs;
        if (++rs == RS) {
          rs = 0;
          ++k;
        }
      }
      for (int64_t t = 0; t * mr < mc; ++t) {
        float* panel = dst + t * kc * mr;
        for (int64_t ii = 0; ii < mr; ++ii) {
          const int64_t c = i0 + t * mr + ii;
          if (t * mr + ii < mc) {
            for (int64_t pp = 0; pp < kc; ++pp) panel[pp * mr + ii] = wg[offset[pp] + c * RS];
          } else {
            for (int64_t pp = 0; pp < kc; ++pp) panel[pp * mr + ii] = 0.0f;
          }
        }
      }
    };
    // Row (k, r, s) of col(dy) is row (k, r-1-r, s-1-s) of the im2col of dy.
    auto tap_of = [&](int64_t rr) {
      return Im2colTap{(g * kg + rr / RS) * PQ, static_cast<int32_t>(sh.r - 1 - rr % RS / sh.s),
                       static_cast<int32_t>(sh.s - 1 - rr % sh.s)};
    };
    auto store_c = [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
      store_nchw(tile, ts, rows, cols, dx, sh.c, g * cg + i0, HW, j0, accumulate || !first);
    };
    gemm_blocked(cg, sh.n * HW, kg * RS, blocking_of(algo), workspace, pack_a,
                 [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
                   pack_im2col_panels(packer, p0, kc, j0, nc, nr, dst, tap_of);
                 },
                 store_c);
  }
}

void conv_backward_filter_tiled_gemm(ConvAlgo algo, const ConvShape& sh, const float* x, const float* dy,
                                        float* dw, float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s, depth = cg * RS;
  const int64_t PQ = sh.p() * sh.q(), HW = sh.h * sh.w;
  const Im2colPacker packer(x_source(sh, x), sh.r, sh.s);
  for (int64_t g = 0; g < sh.groups; ++g) {
    gemm_nt_blocked(
        kg, depth, sh.n * PQ, nt_blocking_of(algo), workspace,
        // A = dy_g: rows k, along the pixels.
        [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t ld, float* dst) {
          pack_nchw_rows(dy, sh.k, g * kg, PQ, i0, mc, p0, kc, ld, dst);
        },
        // B = im2col(x)_g: rows (c, r, s), along the pixels, 32 pixels at a time.
        [&](int64_t j0, int64_t nc, int64_t p0, int64_t kc, int64_t ld, float* dst) {
          Im2colTap taps[kMaxDepth];
          for (int64_t jj = 0; jj < nc; ++jj) {
            const int64_t rr = j0 + jj;
            taps[jj] = {(g * cg + rr / RS) * HW, static_cast<int32_t>(rr % RS / sh.s), static_cast<int32_t>(rr % sh.s)};
          }
          for (int64_t c0 = 0; c0 < ld; c0 += Im2colPacker::kMaxPanel)
            packer.rows(taps, nc, p0 + c0, std::max<int64_t>(0, std::min(Im2colPacker::kMaxPanel, kc - c0)), dst + c0,
                        ld, std::min(Im2colPacker::kMaxPanel, ld - c0));
          std::memset(dst + nc * ld, 0, sizeof(float) * (round_up_to(nc, kDotRows) - nc) * ld);
        },
        [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
          const bool add = accumulate || !first;
          for (int64_t i = 0; i < rows; ++i) {
            float* dst = dw + (g * kg + i0 + i) * depth + j0;
            const float* src_row = tile + i * ts;
            if (add) {
              for (int64_t j = 0; j < cols; ++j) dst[j] += src_row[j];
            } else {
              for (int64_t j = 0; j < cols; ++j) dst[j] = src_row[j];
            }
          }
        });
  }
}

}  // namespace mplan::rt::cpu
