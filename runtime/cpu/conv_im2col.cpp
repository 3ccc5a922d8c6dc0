// The "gemm" convolution: im2col lowering + OpenBLAS SGEMM (cuDNN's
// FWD_ALGO_GEMM, BWD_DATA_ALGO_1, BWD_FILTER_ALGO_1/3 family).
//
// Workspace: the column matrices of every image of the (micro-)batch for one
// group, col[n][(c/groups)*r*s][p*q] floats, reused group after group. It grows
// with the batch, which is what makes micro-batching it worthwhile (mu-cuDNN §III).

#include <cblas.h>

#include <cstring>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/conv_window.h"

namespace mplan::rt::cpu {
namespace {

// Rows of one image's column matrix per group: (c/groups)*r*s; columns: p*q.
int64_t col_rows(const ConvShape& sh) { return sh.c / sh.groups * sh.r * sh.s; }

// col (cg*r*s, p*q) <- the patches of one image's channels [c0, c0+cg).
void im2col(const ConvShape& sh, const float* x_channels, float* col) {
  const int64_t P = sh.p(), Q = sh.q(), cg = sh.c / sh.groups;
  for (int64_t cl = 0; cl < cg; ++cl) {
    const float* xp = x_channels + cl * sh.h * sh.w;
    for (int64_t r = 0; r < sh.r; ++r) {
      OutputRange pr = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
      for (int64_t s = 0; s < sh.s; ++s) {
        OutputRange qr = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
        float* row = col + ((cl * sh.r + r) * sh.s + s) * P * Q;
        std::memset(row, 0, sizeof(float) * P * Q);
        for (int64_t p = pr.lo; p < pr.hi; ++p) {
          const float* xrow = xp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
          float* out = row + p * Q;
          for (int64_t q = qr.lo; q < qr.hi; ++q) out[q] = xrow[q * sh.stride_w];
        }
      }
    }
  }
}

// dx channels [c0, c0+cg) of one image += the column matrix folded back.
void col2im_add(const ConvShape& sh, const float* col, float* dx_channels) {
  const int64_t P = sh.p(), Q = sh.q(), cg = sh.c / sh.groups;
  for (int64_t cl = 0; cl < cg; ++cl) {
    float* dxp = dx_channels + cl * sh.h * sh.w;
    for (int64_t r = 0; r < sh.r; ++r) {
      OutputRange pr = valid_outputs(r, sh.h, sh.stride_h, sh.pad_h, P);
      for (int64_t s = 0; s < sh.s; ++s) {
        OutputRange qr = valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
        const float* row = col + ((cl * sh.r + r) * sh.s + s) * P * Q;
        for (int64_t p = pr.lo; p < pr.hi; ++p) {
          float* dxrow = dxp + (p * sh.stride_h - sh.pad_h + r) * sh.w - sh.pad_w + s;
          const float* in = row + p * Q;
          for (int64_t q = qr.lo; q < qr.hi; ++q) dxrow[q * sh.stride_w] += in[q];
        }
      }
    }
  }
}

}  // namespace

size_t conv_gemm_workspace_bytes(const ConvShape& sh) {
  return sizeof(float) * static_cast<size_t>(sh.n * col_rows(sh) * sh.p() * sh.q());
}

void conv_forward_gemm(const ConvShape& sh, const float* x, const float* w, float* y,
                       float* workspace, bool accumulate) {
  const int64_t PQ = sh.p() * sh.q(), cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int64_t rows = col_rows(sh);
  for (int64_t g = 0; g < sh.groups; ++g) {
    for (int64_t n = 0; n < sh.n; ++n)
      im2col(sh, x + (n * sh.c + g * cg) * sh.h * sh.w, workspace + n * rows * PQ);
    for (int64_t n = 0; n < sh.n; ++n) {
      // y[n, g] (kg x PQ) = W_g (kg x rows) * col_n (rows x PQ)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kg, PQ, rows, 1.0f,
                  w + g * kg * rows, rows, workspace + n * rows * PQ, PQ,
                  accumulate ? 1.0f : 0.0f, y + (n * sh.k + g * kg) * PQ, PQ);
    }
  }
}

void conv_backward_data_gemm(const ConvShape& sh, const float* w, const float* dy, float* dx,
                             float* workspace, bool accumulate) {
  const int64_t PQ = sh.p() * sh.q(), cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int64_t rows = col_rows(sh);
  if (!accumulate) std::memset(dx, 0, sizeof(float) * sh.x_elements());
  for (int64_t g = 0; g < sh.groups; ++g) {
    for (int64_t n = 0; n < sh.n; ++n) {
      // col_n (rows x PQ) = W_g^T (rows x kg) * dy[n, g] (kg x PQ)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, PQ, kg, 1.0f,
                  w + g * kg * rows, rows, dy + (n * sh.k + g * kg) * PQ, PQ, 0.0f,
                  workspace + n * rows * PQ, PQ);
    }
    for (int64_t n = 0; n < sh.n; ++n)
      col2im_add(sh, workspace + n * rows * PQ, dx + (n * sh.c + g * cg) * sh.h * sh.w);
  }
}

void conv_backward_filter_gemm(const ConvShape& sh, const float* x, const float* dy, float* dw,
                               float* workspace, bool accumulate) {
  const int64_t PQ = sh.p() * sh.q(), cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int64_t rows = col_rows(sh);
  if (!accumulate) std::memset(dw, 0, sizeof(float) * sh.w_elements());
  for (int64_t g = 0; g < sh.groups; ++g) {
    for (int64_t n = 0; n < sh.n; ++n)
      im2col(sh, x + (n * sh.c + g * cg) * sh.h * sh.w, workspace + n * rows * PQ);
    for (int64_t n = 0; n < sh.n; ++n) {
      // dW_g (kg x rows) += dy[n, g] (kg x PQ) * col_n^T (PQ x rows)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kg, rows, PQ, 1.0f,
                  dy + (n * sh.k + g * kg) * PQ, PQ, workspace + n * rows * PQ, PQ, 1.0f,
                  dw + g * kg * rows, rows);
    }
  }
}

}  // namespace mplan::rt::cpu
