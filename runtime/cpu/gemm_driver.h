#pragma once
// The blocked GEMM of the CPU backend: C (m x n) = A (m x k) * B (k x n), in the
// loop order of Goto & van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication", 2008, Fig. 8; BLIS's five loops): B is packed panel by panel
// (kc x nc, L3/L2), A block by block (mc x kc, L2), and the micro-kernel
// (runtime/cpu/gemm_kernel.h) multiplies an mr-row sliver of A by an nr-column
// sliver of B in registers.
//
// The operands are never materialised: the caller's pack_a and pack_b read them
// straight from the tensors (a convolution's implicit im2col, a transposed or
// rotated filter) and store_c writes each finished tile where it belongs. The only
// memory is the two packing buffers, gemm_workspace_floats() floats from the
// caller's workspace, so a convolution's workspace is a few hundred KiB whatever
// the batch (cuDNN's IMPLICIT_PRECOMP_GEMM is the GPU's analogue).
//
// Contracts of the callbacks:
//   pack_a(i0, mc, p0, kc, mr, dst): A[i0 .. i0+mc) x [p0 .. p0+kc) as ceil(mc/mr)
//       panels of mr rows, panel t at dst + t*kc*mr, element (i, p) of the panel at
//       [p*mr + i]; rows past m are zeros.
//   pack_b(p0, kc, j0, nc, nr, dst): B[p0 .. p0+kc) x [j0 .. j0+nc) as ceil(nc/nr)
//       panels of nr columns, panel t at dst + t*kc*nr, element (p, j) at [p*nr + j];
//       columns past n are zeros.
//   store_c(i0, j0, rows, cols, tile, tile_stride, first): the rows x cols corner of
//       tile is C[i0.., j0..]'s share of the product over one kc block; `first` is true
//       for the first kc block (write, unless the caller accumulates), false for later
//       ones (add).
//
// gemm_nt_blocked() is the same for C = A * B^T with A (m x k) and B (n x k) both
// stored along k, multiplied by the dot-product kernel: pack_a(i0, mc, p0, kc, ld, dst)
// and pack_b(j0, nc, p0, kc, ld, dst) write rows of kc floats at dst + row*ld, zero
// from kc to ld (a multiple of 16) and zero rows past m (or n) up to a multiple of 4.

#include <algorithm>
#include <cstdint>

#include "runtime/cpu/gemm_kernel.h"

namespace mplan::rt::cpu {

// Block sizes (upper bounds; each shrinks to the problem).
struct GemmBlocking {
  int64_t mc = 96;    // rows of A per packed block (a multiple of kPanelRowsMultiple)
  int64_t kc = 256;   // depth per packed block
  int64_t nc = 1024;  // columns of B per packed panel (a multiple of kPanelColsMultiple)
};

inline int64_t round_up_to(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The depth per block: k split into equal blocks of at most `most` (a multiple of
// `multiple`), so that no block is a short remainder.
inline int64_t balanced_depth(int64_t k, int64_t most, int64_t multiple) {
  const int64_t blocks = (k + most - 1) / most;
  return std::min(most, round_up_to((k + blocks - 1) / blocks, multiple));
}

// Floats of workspace gemm_blocked() needs for an m x n x k problem: the packed A
// block, the packed B panel and 64 bytes of alignment slack. The same on every CPU:
// panel sizes are rounded to multiples every kernel's mr and nr divide.
inline int64_t gemm_workspace_floats(int64_t m, int64_t n, int64_t k, const GemmBlocking& blocking) {
  const int64_t mc = round_up_to(std::min(m, blocking.mc), kPanelRowsMultiple);
  const int64_t kc = std::min(k, blocking.kc);
  const int64_t nc = round_up_to(std::min(n, blocking.nc), kPanelColsMultiple);
  return mc * kc + kc * nc + 16;
}

template <class PackA, class PackB, class StoreC>
void gemm_blocked(int64_t m, int64_t n, int64_t k, const GemmBlocking& blocking, float* workspace,
                  PackA&& pack_a, PackB&& pack_b, StoreC&& store_c) {
  const MicroKernel& kernel = micro_kernel();
  const int64_t mr = kernel.mr, nr = kernel.nr;
  const int64_t MC = std::min(blocking.mc, round_up_to(m, kPanelRowsMultiple));
  const int64_t KC = std::min(k, balanced_depth(k, blocking.kc, 8));
  const int64_t NC = std::min(blocking.nc, round_up_to(n, kPanelColsMultiple));
  // 64-byte aligned packing buffers.
  float* packed_a = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 63) & ~uintptr_t{63});
  float* packed_b = packed_a + round_up_to(MC, kPanelRowsMultiple) * KC;
  alignas(64) float tile[kMaxTileFloats];
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    const int64_t nc = std::min(NC, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      const int64_t kc = std::min(KC, k - p0);
      pack_b(p0, kc, j0, nc, nr, packed_b);
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        const int64_t mc = std::min(MC, m - i0);
        pack_a(i0, mc, p0, kc, mr, packed_a);
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const float* b_panel = packed_b + jr / nr * kc * nr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            kernel.run(kc, packed_a + ir / mr * kc * mr, b_panel, tile);
            store_c(i0 + ir, j0 + jr, std::min(mr, mc - ir), std::min(nr, nc - jr), tile, nr, p0 == 0);
          }
        }
      }
    }
  }
}

// Block sizes of the NT GEMM (upper bounds).
struct GemmNtBlocking {
  int64_t mc = 64;    // rows of A per packed block
  int64_t nc = 64;    // rows of B per packed block
  int64_t kc = 1024;  // depth per block (a multiple of kDotDepthMultiple): 4 + 4 rows fill L1
};

inline int64_t gemm_nt_workspace_floats(int64_t m, int64_t n, int64_t k, const GemmNtBlocking& blocking) {
  const int64_t mc = round_up_to(std::min(m, blocking.mc), kDotRows);
  const int64_t nc = round_up_to(std::min(n, blocking.nc), kDotRows);
  const int64_t kc = round_up_to(std::min(k, blocking.kc), kDotDepthMultiple);
  return (mc + nc) * kc + 16;
}

template <class PackA, class PackB, class StoreC>
void gemm_nt_blocked(int64_t m, int64_t n, int64_t k, const GemmNtBlocking& blocking, float* workspace,
                     PackA&& pack_a, PackB&& pack_b, StoreC&& store_c) {
  const DotKernel kernel = dot_kernel();
  const int64_t MC = std::min(blocking.mc, round_up_to(m, kDotRows));
  const int64_t NC = std::min(blocking.nc, round_up_to(n, kDotRows));
  const int64_t KC = balanced_depth(k, blocking.kc, kDotDepthMultiple);
  float* packed_a = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 63) & ~uintptr_t{63});
  float* packed_b = packed_a + round_up_to(MC, kDotRows) * KC;
  float tile[kDotRows * kDotRows];
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t kc = std::min(KC, k - p0), ld = round_up_to(kc, kDotDepthMultiple);
    for (int64_t i0 = 0; i0 < m; i0 += MC) {
      const int64_t mc = std::min(MC, m - i0);
      pack_a(i0, mc, p0, kc, ld, packed_a);
      for (int64_t j0 = 0; j0 < n; j0 += NC) {
        const int64_t nc = std::min(NC, n - j0);
        pack_b(j0, nc, p0, kc, ld, packed_b);
        for (int64_t jr = 0; jr < nc; jr += kDotRows)
          for (int64_t ir = 0; ir < mc; ir += kDotRows) {
            kernel(ld, packed_a + ir * ld, ld, packed_b + jr * ld, ld, tile);
            store_c(i0 + ir, j0 + jr, std::min(kDotRows, mc - ir), std::min(kDotRows, nc - jr), tile, kDotRows,
                    p0 == 0);
          }
      }
    }
  }
}

}  // namespace mplan::rt::cpu
