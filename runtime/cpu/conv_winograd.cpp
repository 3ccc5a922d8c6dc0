// The "winograd" convolution: F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016), cuDNN's WINOGRAD_NONFUSED analogue, for
// 3x3 filters at stride 1, any zero padding, groups.
//
//   Y = A^T [ sum_c (G g G^T) ⊙ (B^T d B) ] A     per 2x2 output tile
//
// Each of the 16 tile positions xi is one SGEMM over channels:
// M[xi] (k x tiles) = U[xi] (k x c) * V[xi] (c x tiles). Workspace (floats):
// U: 16*k_out*c_in/groups (all groups), then V: 16*c_in/groups*T and
// M: 16*k_out/groups*T, reused group after group, T = n * ceil(P/2) * ceil(Q/2).
//
// Backward-data is the same forward over dy, padded by 2-pad, with the filter
// rotated by 180° and its in/out channels swapped (the transposed convolution
// of a stride-1 layer), so it needs pad <= 2.

#include <cblas.h>

#include <cstring>

#include "runtime/cpu/conv_kernels.h"

namespace mplan::rt::cpu {
namespace {

// A stride-1 3x3 convolution with groups: in (n, cin, h, w) -> out (n, kout, oh, ow).
struct WinogradProblem {
  int64_t n = 1, cin = 1, h = 1, w = 1, kout = 1, groups = 1, pad_h = 0, pad_w = 0;
  int64_t out_h() const { return h + 2 * pad_h - 2; }
  int64_t out_w() const { return w + 2 * pad_w - 2; }
  int64_t tiles_h() const { return (out_h() + 1) / 2; }
  int64_t tiles_w() const { return (out_w() + 1) / 2; }
  int64_t tiles() const { return n * tiles_h() * tiles_w(); }
  size_t u_floats() const { return 16 * kout * (cin / groups); }
  size_t v_floats() const { return 16 * (cin / groups) * tiles(); }
  size_t m_floats() const { return 16 * (kout / groups) * tiles(); }
  size_t workspace_bytes() const { return sizeof(float) * (u_floats() + v_floats() + m_floats()); }
};

WinogradProblem forward_problem(const ConvShape& sh) {
  return {sh.n, sh.c, sh.h, sh.w, sh.k, sh.groups, sh.pad_h, sh.pad_w};
}
WinogradProblem backward_data_problem(const ConvShape& sh) {
  return {sh.n, sh.k, sh.p(), sh.q(), sh.c, sh.groups, 2 - sh.pad_h, 2 - sh.pad_w};
}

// U[xi][k][cl] = (G g G^T)[xi] for the 3x3 filter g of output k, local input cl.
void transform_filter(const float g[9], float* U, size_t xi_stride) {
  float t[4][3];  // G g
  for (int j = 0; j < 3; ++j) {
    float g0 = g[0 * 3 + j], g1 = g[1 * 3 + j], g2 = g[2 * 3 + j];
    t[0][j] = g0;
    t[1][j] = 0.5f * (g0 + g1 + g2);
    t[2][j] = 0.5f * (g0 - g1 + g2);
    t[3][j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                  0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
    for (int j = 0; j < 4; ++j) U[(i * 4 + j) * xi_stride] = u[j];
  }
}

// The stride-1 3x3 convolution of `in` by the filter already transformed into the
// workspace's U, written (or added) to `out`.
void winograd_run(const WinogradProblem& pb, const float* in, float* out, float* workspace,
                  bool accumulate) {
  const int64_t cg = pb.cin / pb.groups, kg = pb.kout / pb.groups;
  const int64_t TH = pb.tiles_h(), TW = pb.tiles_w(), T = pb.tiles();
  const int64_t OH = pb.out_h(), OW = pb.out_w();
  const float* U = workspace;
  float* V = workspace + pb.u_floats();
  float* M = V + pb.v_floats();
  for (int64_t g = 0; g < pb.groups; ++g) {
    // V[xi][cl][t] = (B^T d B)[xi] for the 4x4 input tile d of tile t.
    for (int64_t n = 0; n < pb.n; ++n) {
      for (int64_t cl = 0; cl < cg; ++cl) {
        const float* plane = in + (n * pb.cin + g * cg + cl) * pb.h * pb.w;
        for (int64_t ty = 0; ty < TH; ++ty) {
          for (int64_t tx = 0; tx < TW; ++tx) {
            float d[4][4];
            for (int i = 0; i < 4; ++i) {
              int64_t ih = 2 * ty - pb.pad_h + i;
              for (int j = 0; j < 4; ++j) {
                int64_t iw = 2 * tx - pb.pad_w + j;
                d[i][j] = (ih >= 0 && ih < pb.h && iw >= 0 && iw < pb.w) ? plane[ih * pb.w + iw] : 0.0f;
              }
            }
            float b[4][4];  // B^T d
            for (int j = 0; j < 4; ++j) {
              b[0][j] = d[0][j] - d[2][j];
              b[1][j] = d[1][j] + d[2][j];
              b[2][j] = d[2][j] - d[1][j];
              b[3][j] = d[1][j] - d[3][j];
            }
            const int64_t t = (n * TH + ty) * TW + tx;
            float* v = V + cl * T + t;
            const size_t xi_stride = static_cast<size_t>(cg * T);
            for (int i = 0; i < 4; ++i) {
              float e[4] = {b[i][0] - b[i][2], b[i][1] + b[i][2], b[i][2] - b[i][1], b[i][1] - b[i][3]};
              for (int j = 0; j < 4; ++j) v[(i * 4 + j) * xi_stride] = e[j];
            }
          }
        }
      }
    }
    // M[xi] (kg x T) = U_g[xi] (kg x cg) * V[xi] (cg x T)
    for (int xi = 0; xi < 16; ++xi) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kg, T, cg, 1.0f,
                  U + xi * pb.kout * cg + g * kg * cg, cg, V + xi * cg * T, T, 0.0f,
                  M + xi * kg * T, T);
    }
    // out tile = A^T m A, m[xi] = M[xi][k][t].
    const size_t xi_stride = static_cast<size_t>(kg * T);
    for (int64_t kl = 0; kl < kg; ++kl) {
      for (int64_t n = 0; n < pb.n; ++n) {
        float* oplane = out + (n * pb.kout + g * kg + kl) * OH * OW;
        for (int64_t ty = 0; ty < TH; ++ty) {
          for (int64_t tx = 0; tx < TW; ++tx) {
            const float* m = M + kl * T + (n * TH + ty) * TW + tx;
            float a[2][4];  // A^T m
            for (int j = 0; j < 4; ++j) {
              float m0 = m[(0 * 4 + j) * xi_stride], m1 = m[(1 * 4 + j) * xi_stride];
              float m2 = m[(2 * 4 + j) * xi_stride], m3 = m[(3 * 4 + j) * xi_stride];
              a[0][j] = m0 + m1 + m2;
              a[1][j] = m1 - m2 - m3;
            }
            for (int i = 0; i < 2; ++i) {
              int64_t oh = 2 * ty + i;
              if (oh >= OH) continue;
              float o[2] = {a[i][0] + a[i][1] + a[i][2], a[i][1] - a[i][2] - a[i][3]};
              for (int j = 0; j < 2; ++j) {
                int64_t ow = 2 * tx + j;
                if (ow >= OW) continue;
                float& dst = oplane[oh * OW + ow];
                dst = accumulate ? dst + o[j] : o[j];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool conv_winograd_supported(ConvDirection direction, const ConvShape& sh) {
  if (sh.r != 3 || sh.s != 3 || sh.stride_h != 1 || sh.stride_w != 1) return false;
  switch (direction) {
    case ConvDirection::forward: return true;
    case ConvDirection::backward_data: return sh.pad_h <= 2 && sh.pad_w <= 2;
    case ConvDirection::backward_filter: return false;
  }
  return false;
}

size_t conv_winograd_workspace_bytes(ConvDirection direction, const ConvShape& sh) {
  switch (direction) {
    case ConvDirection::forward: return forward_problem(sh).workspace_bytes();
    case ConvDirection::backward_data: return backward_data_problem(sh).workspace_bytes();
    case ConvDirection::backward_filter: return 0;
  }
  return 0;
}

void conv_forward_winograd(const ConvShape& sh, const float* x, const float* w, float* y,
                           float* workspace, bool accumulate) {
  WinogradProblem pb = forward_problem(sh);
  const int64_t cg = sh.c / sh.groups;
  const size_t xi_stride = static_cast<size_t>(sh.k * cg);
  for (int64_t k = 0; k < sh.k; ++k)
    for (int64_t cl = 0; cl < cg; ++cl)
      transform_filter(w + (k * cg + cl) * 9, workspace + k * cg + cl, xi_stride);
  winograd_run(pb, x, y, workspace, accumulate);
}

void conv_backward_data_winograd(const ConvShape& sh, const float* w, const float* dy, float* dx,
                                 float* workspace, bool accumulate) {
  WinogradProblem pb = backward_data_problem(sh);
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  // Filter of the transposed convolution: w'[c][kl] = rot180(w[g*kg + kl][c - g*cg]).
  const size_t xi_stride = static_cast<size_t>(sh.c * kg);
  for (int64_t c = 0; c < sh.c; ++c) {
    const int64_t g = c / cg;
    for (int64_t kl = 0; kl < kg; ++kl) {
      const float* src = w + ((g * kg + kl) * cg + (c - g * cg)) * 9;
      float rotated[9];
      for (int i = 0; i < 9; ++i) rotated[i] = src[8 - i];
      transform_filter(rotated, workspace + c * kg + kl, xi_stride);
    }
  }
  winograd_run(pb, dy, dx, workspace, accumulate);
}

}  // namespace mplan::rt::cpu
