// The "implicit_gemm" convolutions: every direction as one blocked GEMM per group
// over the whole (micro-)batch (runtime/cpu/gemm_driver.h), with the operands packed
// straight from the tensors: no column matrix, so the workspace is the two packing
// buffers (a few hundred KiB) whatever the batch. cuDNN's IMPLICIT_PRECOMP_GEMM is
// the GPU's analogue; the batch-wide GEMM is what oneDNN's and cuDNN's kernels do
// where the per-image "gemm" runs one small product per image.
//
// With g the group, Cg = c/groups, Kg = k/groups, RS = r*s, and columns running over
// the pixels of every image of the batch:
//   forward          y_g  (Kg x n*P*Q)    = W_g (Kg x Cg*RS)  * im2col(x)_g (Cg*RS x n*P*Q)
//   backward-data    dx_g (Cg x n*H*W)    = W_g^T, as [c][(k, r, s)] (Cg x Kg*RS)
//                                           * col(dy)_g (Kg*RS x n*H*W)
//   backward-filter  dW_g (Kg x Cg*RS)   += dy_g (Kg x n*P*Q) * im2col(x)_g^T (n*P*Q x Cg*RS)
// where col(dy)[(k, r, s)][(n, ih, iw)] = dy[n, k, ih + pad - r, iw + pad - s] (0
// outside): the transposed convolution as a gather, so each dx element is written
// once (the im2col of dy padded by r-1-pad, with the filter rotated). That holds at
// stride 1; a strided layer's backward-data is instead
//   col_g (Cg*RS x n*P*Q) = W_g^T (Cg*RS x Kg) * dy_g (Kg x n*P*Q)
// with each finished tile of col added into dx where it belongs (col2im on the fly).

#include <algorithm>
#include <cstring>

#include "runtime/check.h"
#include "runtime/conv.h"
#include "runtime/cpu/conv_window.h"
#include "runtime/cpu/gemm_driver.h"

namespace mplan::rt::cpu {
namespace {

constexpr int64_t kMaxDepth = 256;  // GemmBlocking::kc bound: the per-row tables below
constexpr int64_t kMaxPanelCols = 32;

GemmBlocking blocking_of(ConvAlgo algo) {
  GemmBlocking b;
  if (algo == ConvAlgo::implicit_gemm_lean) {
    b.mc = 24;
    b.kc = 128;
    b.nc = 64;
  }
  return b;
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

// dst[0 .. len) = src[0, step, 2*step, ...].
inline void gather(float* dst, const float* src, int64_t len, int64_t step) {
  if (step == 1) {
    std::memcpy(dst, src, sizeof(float) * len);
  } else {
    for (int64_t t = 0; t < len; ++t) dst[t] = src[t * step];
  }
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

// One row (c, r, s) of an im2col matrix: where its values come from.
struct ColRow {
  int64_t channel_offset;  // of the channel's plane in an image, in floats
  int64_t r, s;
  OutputRange rows_ok, cols_ok;  // output rows and columns whose input lies inside
};

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of im2col(x) for group g: row
// (cl, r, s), column (n, oh, ow) holds x[n, g*Cg + cl, oh*stride - pad + r, ow*stride - pad + s].
void pack_im2col(const ConvShape& sh, const float* x, int64_t g, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                 int64_t nr, float* dst) {
  const int64_t P = sh.p(), Q = sh.q(), RS = sh.r * sh.s, cg = sh.c / sh.groups;
  ColRow rows[kMaxDepth];
  for (int64_t pp = 0; pp < kc; ++pp) {
    const int64_t rr = p0 + pp, cl = rr / RS, r = rr % RS / sh.s, s = rr % sh.s;
    rows[pp] = {(g * cg + cl) * sh.h * sh.w, r, s, valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P),
                valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q)};
  }
  const int64_t image = sh.c * sh.h * sh.w;
  Run runs[kMaxPanelCols];
  for (int64_t t = 0; t * nr < nc; ++t) {
    const int64_t cols = std::min(nr, nc - t * nr);
    const int64_t run_count = split_runs(j0 + t * nr, cols, P, Q, runs);
    float* panel = dst + t * kc * nr;
    for (int64_t pp = 0; pp < kc; ++pp) {
      const ColRow& row = rows[pp];
      float* d = panel + pp * nr;
      for (int64_t k = 0; k < run_count; ++k) {
        const Run& run = runs[k];
        float* dd = d + run.first_col;
        if (run.row < row.rows_ok.lo || run.row >= row.rows_ok.hi) {
          std::memset(dd, 0, sizeof(float) * run.len);
          continue;
        }
        const int64_t lo = std::clamp(row.cols_ok.lo, run.x0, run.x0 + run.len);
        const int64_t hi = std::clamp(row.cols_ok.hi, lo, run.x0 + run.len);
        const float* xrow = x + run.n * image + row.channel_offset +
                            (run.row * sh.stride_h - sh.pad_h + row.r) * sh.w - sh.pad_w + row.s;
        for (int64_t ow = run.x0; ow < lo; ++ow) dd[ow - run.x0] = 0.0f;
        gather(dd + (lo - run.x0), xrow + lo * sh.stride_w, hi - lo, sh.stride_w);
        for (int64_t ow = hi; ow < run.x0 + run.len; ++ow) dd[ow - run.x0] = 0.0f;
      }
      for (int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
    }
  }
}

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of col(dy) for group g of a stride-1
// layer (the header's transposed-convolution gather): row (k, r, s), column (n, ih, iw).
void pack_transposed_col(const ConvShape& sh, const float* dy, int64_t g, int64_t p0, int64_t kc, int64_t j0,
                         int64_t nc, int64_t nr, float* dst) {
  const int64_t P = sh.p(), Q = sh.q(), RS = sh.r * sh.s, kg = sh.k / sh.groups;
  struct Row {
    int64_t channel_offset, r, s;
  } rows[kMaxDepth];
  for (int64_t pp = 0; pp < kc; ++pp) {
    const int64_t rr = p0 + pp, k = rr / RS;
    rows[pp] = {(g * kg + k) * P * Q, rr % RS / sh.s, rr % sh.s};
  }
  const int64_t image = sh.k * P * Q;
  Run runs[kMaxPanelCols];
  for (int64_t t = 0; t * nr < nc; ++t) {
    const int64_t cols = std::min(nr, nc - t * nr);
    const int64_t run_count = split_runs(j0 + t * nr, cols, sh.h, sh.w, runs);
    float* panel = dst + t * kc * nr;
    for (int64_t pp = 0; pp < kc; ++pp) {
      const Row& row = rows[pp];
      float* d = panel + pp * nr;
      for (int64_t k = 0; k < run_count; ++k) {
        const Run& run = runs[k];
        float* dd = d + run.first_col;
        const int64_t oh = run.row + sh.pad_h - row.r;
        if (oh < 0 || oh >= P) {
          std::memset(dd, 0, sizeof(float) * run.len);
          continue;
        }
        // ow = iw + pad - s must lie in [0, Q).
        const int64_t lo = std::clamp(row.s - sh.pad_w, run.x0, run.x0 + run.len);
        const int64_t hi = std::clamp(Q + row.s - sh.pad_w, lo, run.x0 + run.len);
        const float* dyrow = dy + run.n * image + row.channel_offset + oh * Q;
        for (int64_t iw = run.x0; iw < lo; ++iw) dd[iw - run.x0] = 0.0f;
        std::memcpy(dd + (lo - run.x0), dyrow + lo + sh.pad_w - row.s, sizeof(float) * (hi - lo));
        for (int64_t iw = hi; iw < run.x0 + run.len; ++iw) dd[iw - run.x0] = 0.0f;
      }
      for (int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
    }
  }
}

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of a group's share of a batch-wide NCHW
// tensor seen as a (channels x n*pixels) matrix: row ch is channel channel0 + ch.
void pack_nchw_rows(const float* t, int64_t channels, int64_t channel0, int64_t pixels, int64_t p0, int64_t kc,
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

bool unit_stride(const ConvShape& sh) { return sh.stride_h == 1 && sh.stride_w == 1; }

}  // namespace

size_t conv_implicit_gemm_workspace_bytes(ConvAlgo algo, ConvDirection direction, const ConvShape& sh) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s;
  const int64_t out_pixels = sh.n * sh.p() * sh.q(), in_pixels = sh.n * sh.h * sh.w;
  const GemmBlocking b = blocking_of(algo);
  int64_t floats = 0;
  switch (direction) {
    case ConvDirection::forward: floats = gemm_workspace_floats(kg, out_pixels, cg * RS, b); break;
    case ConvDirection::backward_data:
      floats = unit_stride(sh) ? gemm_workspace_floats(cg, in_pixels, kg * RS, b)
                               : gemm_workspace_floats(cg * RS, out_pixels, kg, b);
      break;
    case ConvDirection::backward_filter: floats = gemm_workspace_floats(kg, cg * RS, out_pixels, b); break;
  }
  return sizeof(float) * static_cast<size_t>(floats);
}

void conv_forward_implicit_gemm(ConvAlgo algo, const ConvShape& sh, const float* x, const float* w, float* y,
                                float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, depth = cg * sh.r * sh.s;
  const int64_t PQ = sh.p() * sh.q();
  for (int64_t g = 0; g < sh.groups; ++g) {
    const float* wg = w + g * kg * depth;
    gemm_blocked(
        kg, sh.n * PQ, depth, blocking_of(algo), workspace,
        [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
          pack_rows(wg, depth, i0, mc, p0, kc, mr, dst);
        },
        [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
          pack_im2col(sh, x, g, p0, kc, j0, nc, nr, dst);
        },
        [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
          store_nchw(tile, ts, rows, cols, y, sh.k, g * kg + i0, PQ, j0, accumulate || !first);
        });
  }
}

void conv_backward_data_implicit_gemm(ConvAlgo algo, const ConvShape& sh, const float* w, const float* dy, float* dx,
                                      float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s;
  const int64_t HW = sh.h * sh.w, PQ = sh.p() * sh.q();
  if (!unit_stride(sh)) {
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
            pack_nchw_rows(dy, sh.k, g * kg, PQ, p0, kc, j0, nc, nr, dst);
          },
          [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool) {
            add_col_tile(sh, g, tile, ts, i0, rows, j0, cols, dx);
          });
    }
    return;
  }
  for (int64_t g = 0; g < sh.groups; ++g) {
    const float* wg = w + g * kg * cg * RS;
    gemm_blocked(
        cg, sh.n * HW, kg * RS, blocking_of(algo), workspace,
        // A[c][(k, rs)] = W[g*kg + k][c][rs].
        [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
          int64_t offset[kMaxDepth];
          for (int64_t pp = 0; pp < kc; ++pp) offset[pp] = (p0 + pp) / RS * cg * RS + (p0 + pp) % RS;
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
        },
        [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
          pack_transposed_col(sh, dy, g, p0, kc, j0, nc, nr, dst);
        },
        [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
          store_nchw(tile, ts, rows, cols, dx, sh.c, g * cg + i0, HW, j0, accumulate || !first);
        });
  }
}

void conv_backward_filter_implicit_gemm(ConvAlgo algo, const ConvShape& sh, const float* x, const float* dy,
                                        float* dw, float* workspace, bool accumulate) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, RS = sh.r * sh.s, depth = cg * RS;
  const int64_t P = sh.p(), Q = sh.q(), PQ = P * Q;
  const int64_t image = sh.c * sh.h * sh.w;
  for (int64_t g = 0; g < sh.groups; ++g) {
    gemm_blocked(
        kg, depth, sh.n * PQ, blocking_of(algo), workspace,
        // A[k][j] = dy[n(j), g*kg + k, pixel(j)]: runs of pixels within one image.
        [&](int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, float* dst) {
          for (int64_t t = 0; t * mr < mc; ++t) {
            float* panel = dst + t * kc * mr;
            for (int64_t ii = 0; ii < mr; ++ii) {
              const int64_t k = i0 + t * mr + ii;
              if (t * mr + ii >= mc) {
                for (int64_t pp = 0; pp < kc; ++pp) panel[pp * mr + ii] = 0.0f;
                continue;
              }
              int64_t n = p0 / PQ, pixel = p0 % PQ;
              for (int64_t pp = 0; pp < kc;) {
                const int64_t len = std::min(kc - pp, PQ - pixel);
                const float* src = dy + (n * sh.k + g * kg + k) * PQ + pixel;
                for (int64_t q = 0; q < len; ++q) panel[(pp + q) * mr + ii] = src[q];
                pp += len;
                pixel = 0;
                ++n;
              }
            }
          }
        },
        // B[j][(c, r, s)] = im2col(x)^T: for each column (c, r, s), runs of pixels.
        [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* dst) {
          Run runs[kMaxDepth];
          const int64_t run_count = split_runs(p0, kc, P, Q, runs);
          for (int64_t t = 0; t * nr < nc; ++t) {
            float* panel = dst + t * kc * nr;
            for (int64_t jj = 0; jj < nr; ++jj) {
              const int64_t rr = j0 + t * nr + jj;
              if (t * nr + jj >= nc) {
                for (int64_t pp = 0; pp < kc; ++pp) panel[pp * nr + jj] = 0.0f;
                continue;
              }
              const int64_t cl = rr / RS, r = rr % RS / sh.s, s = rr % sh.s;
              const OutputRange rows_ok = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
              const OutputRange cols_ok = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
              for (int64_t k = 0; k < run_count; ++k) {
                const Run& run = runs[k];
                float* d = panel + run.first_col * nr + jj;
                if (run.row < rows_ok.lo || run.row >= rows_ok.hi) {
                  for (int64_t q = 0; q < run.len; ++q) d[q * nr] = 0.0f;
                  continue;
                }
                const float* xrow = x + run.n * image + (g * cg + cl) * sh.h * sh.w +
                                    (run.row * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
                for (int64_t q = 0; q < run.len; ++q) {
                  const int64_t ow = run.x0 + q;
                  d[q * nr] = ow >= cols_ok.lo && ow < cols_ok.hi ? xrow[ow * sh.stride_w] : 0.0f;
                }
              }
            }
          }
        },
        [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ts, bool first) {
          const bool add = accumulate || !first;
          for (int64_t i = 0; i < rows; ++i) {
            float* dst = dw + (g * kg + i0 + i) * depth + j0;
            const float* src = tile + i * ts;
            if (add) {
              for (int64_t j = 0; j < cols; ++j) dst[j] += src[j];
            } else {
              for (int64_t j = 0; j < cols; ++j) dst[j] = src[j];
            }
          }
        });
  }
}

}  // namespace mplan::rt::cpu
