// Micro-kernels of the CPU GEMM, one per instruction set (runtime/cpu/gemm_kernel.h).
// The AVX-512 and AVX2 kernels are compiled for their instruction set with a target
// attribute and chosen at run time, so the runtime builds for any x86-64 (and any
// other CPU, with the portable kernel only).

#include "runtime/cpu/gemm_kernel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MPLAN_X86_KERNELS 1
#endif

namespace mplan::rt::cpu {
namespace {

// Portable 4 x 8: plain loops the compiler vectorises for the baseline ISA.
void kernel_portable(int64_t kc, const float* a, const float* b, float* tile) {
  float c[4][8] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * 4;
    const float* bp = b + p * 8;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 8; ++j) c[i][j] += ap[i] * bp[j];
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) tile[i * 8 + j] = c[i][j];
}

#ifdef MPLAN_X86_KERNELS

// AVX2 + FMA, 6 x 16: 12 accumulators, 2 loads of B and 6 broadcasts of A per step
// (BLIS's Haswell sgemm shape).
__attribute__((target("avx2,fma"))) void kernel_avx2_6x16(int64_t kc, const float* a, const float* b,
                                                            float* tile) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 ai = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += 6;
    b += 16;
  }
  _mm256_storeu_ps(tile + 0 * 16, c00);
  _mm256_storeu_ps(tile + 0 * 16 + 8, c01);
  _mm256_storeu_ps(tile + 1 * 16, c10);
  _mm256_storeu_ps(tile + 1 * 16 + 8, c11);
  _mm256_storeu_ps(tile + 2 * 16, c20);
  _mm256_storeu_ps(tile + 2 * 16 + 8, c21);
  _mm256_storeu_ps(tile + 3 * 16, c30);
  _mm256_storeu_ps(tile + 3 * 16 + 8, c31);
  _mm256_storeu_ps(tile + 4 * 16, c40);
  _mm256_storeu_ps(tile + 4 * 16 + 8, c41);
  _mm256_storeu_ps(tile + 5 * 16, c50);
  _mm256_storeu_ps(tile + 5 * 16 + 8, c51);
}

// AVX-512, 8 x 32: 16 accumulators, 2 loads of B and 8 broadcasts of A per step.
__attribute__((target("avx512f"))) void kernel_avx512_8x32(int64_t kc, const float* a, const float* b,
                                                             float* tile) {
  __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
         c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
         c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
         c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),
         c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),
         c71 = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    __m512 ai = _mm512_set1_ps(a[0]);
    c00 = _mm512_fmadd_ps(ai, b0, c00);
    c01 = _mm512_fmadd_ps(ai, b1, c01);
    ai = _mm512_set1_ps(a[1]);
    c10 = _mm512_fmadd_ps(ai, b0, c10);
    c11 = _mm512_fmadd_ps(ai, b1, c11);
    ai = _mm512_set1_ps(a[2]);
    c20 = _mm512_fmadd_ps(ai, b0, c20);
    c21 = _mm512_fmadd_ps(ai, b1, c21);
    ai = _mm512_set1_ps(a[3]);
    c30 = _mm512_fmadd_ps(ai, b0, c30);
    c31 = _mm512_fmadd_ps(ai, b1, c31);
    ai = _mm512_set1_ps(a[4]);
    c40 = _mm512_fmadd_ps(ai, b0, c40);
    c41 = _mm512_fmadd_ps(ai, b1, c41);
    ai = _mm512_set1_ps(a[5]);
    c50 = _mm512_fmadd_ps(ai, b0, c50);
    c51 = _mm512_fmadd_ps(ai, b1, c51);
    ai = _mm512_set1_ps(a[6]);
    c60 = _mm512_fmadd_ps(ai, b0, c60);
    c61 = _mm512_fmadd_ps(ai, b1, c61);
    ai = _mm512_set1_ps(a[7]);
    c70 = _mm512_fmadd_ps(ai, b0, c70);
    c71 = _mm512_fmadd_ps(ai, b1, c71);
    a += 8;
    b += 32;
  }
  _mm512_storeu_ps(tile + 0 * 32, c00);
  _mm512_storeu_ps(tile + 0 * 32 + 16, c01);
  _mm512_storeu_ps(tile + 1 * 32, c10);
  _mm512_storeu_ps(tile + 1 * 32 + 16, c11);
  _mm512_storeu_ps(tile + 2 * 32, c20);
  _mm512_storeu_ps(tile + 2 * 32 + 16, c21);
  _mm512_storeu_ps(tile + 3 * 32, c30);
  _mm512_storeu_ps(tile + 3 * 32 + 16, c31);
  _mm512_storeu_ps(tile + 4 * 32, c40);
  _mm512_storeu_ps(tile + 4 * 32 + 16, c41);
  _mm512_storeu_ps(tile + 5 * 32, c50);
  _mm512_storeu_ps(tile + 5 * 32 + 16, c51);
  _mm512_storeu_ps(tile + 6 * 32, c60);
  _mm512_storeu_ps(tile + 6 * 32 + 16, c61);
  _mm512_storeu_ps(tile + 7 * 32, c70);
  _mm512_storeu_ps(tile + 7 * 32 + 16, c71);
}

#endif  // MPLAN_X86_KERNELS

MicroKernel choose() {
#ifdef MPLAN_X86_KERNELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {8, 32, "avx512 8x32", kernel_avx512_8x32};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {6, 16, "avx2 6x16", kernel_avx2_6x16};
#endif
  return {4, 8, "portable 4x8", kernel_portable};
}

}  // namespace

const MicroKernel& micro_kernel() {
  static const MicroKernel kernel = choose();
  return kernel;
}

}  // namespace mplan::rt::cpu
