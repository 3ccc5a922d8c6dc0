#pragma once
// The register-blocked inner kernel of the CPU backend's own GEMM (runtime/cpu/
// gemm_driver.h): C_tile (mr x nr) = sum over p of A_panel[p] (mr) x B_panel[p] (nr),
// the "micro-kernel" of Goto & van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication", 2008, §6) and of BLIS. One kernel per instruction set, picked once
// from what the CPU supports: AVX-512 (8 x 32), AVX2 with FMA (6 x 16), or portable
// C++ (4 x 8).
//
// Why not OpenBLAS's: the convolutions pack their operands straight from the tensors
// (implicit im2col, no column matrix), which needs the packing and the kernel apart;
// and OpenBLAS 0.3.21 runs its AVX2 (Haswell) kernels on AVX-512 CPUs it does not
// know (AMD Zen 4 and 5), half the machine's peak.

#include <cstdint>

namespace mplan::rt::cpu {

// Packed-panel sizes are rounded up to these multiples, which every kernel's mr and
// nr divide, so workspace sizes do not depend on the machine's kernel.
inline constexpr int64_t kPanelRowsMultiple = 24;  // mr in {8, 6, 4}
inline constexpr int64_t kPanelColsMultiple = 32;  // nr in {32, 16, 8}
inline constexpr int kMaxTileFloats = 32 * 8;

struct MicroKernel {
  int mr = 4;  // rows of the C tile (A panel width)
  int nr = 8;  // columns of the C tile (B panel width)
  const char* name = "portable";
  // tile (mr x nr, row stride nr) = A_panel (kc x mr) * B_panel (kc x nr), both packed
  // p-major: a[p * mr + i], b[p * nr + j].
  void (*run)(int64_t kc, const float* a, const float* b, float* tile) = nullptr;
};

// The fastest kernel this CPU runs (chosen once).
const MicroKernel& micro_kernel();

// The dot-product kernel of the "NT" GEMM, C = A * B^T with both operands stored
// along the depth (a convolution's filter gradient: dy rows times im2col rows, both
// contiguous along the pixels, so neither needs a transpose): the 4 x 4 tile of dot
// products of 4 rows of A by 4 rows of B, each kc floats, kc a multiple of 16.
inline constexpr int64_t kDotRows = 4;
inline constexpr int64_t kDotDepthMultiple = 16;
using DotKernel = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* tile);
DotKernel dot_kernel();

}  // namespace mplan::rt::cpu
