// Micro-kernels of the CPU GEMM, one per instruction set (runtime/cpu/gemm_kernel.h).
// The AVX-512 and AVX2 kernels are compiled for their instruction set with a target
// attribute and chosen at run time, so the runtime builds for any x86-64 (and any
// other CPU, with the portable kernel only).

#include "runtime/cpu/gemm_kernel.h"
#include "runtime/cpu/isa.h"

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

// Portable 4 x 4 dot products in 16 lanes.
void dot_portable(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* tile) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const float* ai = a + i * lda;
      const float* bj = b + j * ldb;
      float lanes[16] = {};
      for (int64_t p = 0; p < kc; p += 16)
        for (int l = 0; l < 16; ++l) lanes[l] += ai[p + l] * bj[p + l];
      float total = 0;
      for (float v : lanes) total += v;
      tile[i * 4 + j] = total;
    }
}

#ifdef MPLAN_X86_KERNELS

// AVX2 + FMA dot products: two 4 x 2 halves (8 accumulators, 6 loads per step).
__attribute__((target("avx2,fma"))) void dot_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                                    int64_t ldb, float* tile) {
  for (int half = 0; half < 2; ++half) {
    const float* b0 = b + (2 * half) * ldb;
    const float* b1 = b0 + ldb;
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; p += 8) {
      const __m256 v0 = _mm256_loadu_ps(b0 + p), v1 = _mm256_loadu_ps(b1 + p);
      __m256 u = _mm256_loadu_ps(a + p);
      c00 = _mm256_fmadd_ps(u, v0, c00);
      c01 = _mm256_fmadd_ps(u, v1, c01);
      u = _mm256_loadu_ps(a + lda + p);
      c10 = _mm256_fmadd_ps(u, v0, c10);
      c11 = _mm256_fmadd_ps(u, v1, c11);
      u = _mm256_loadu_ps(a + 2 * lda + p);
      c20 = _mm256_fmadd_ps(u, v0, c20);
      c21 = _mm256_fmadd_ps(u, v1, c21);
      u = _mm256_loadu_ps(a + 3 * lda + p);
      c30 = _mm256_fmadd_ps(u, v0, c30);
      c31 = _mm256_fmadd_ps(u, v1, c31);
    }
    const __m256 acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    for (int t = 0; t < 8; ++t) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[t]);
      float total = 0;
      for (float v : lanes) total += v;
      tile[(t / 2) * 4 + 2 * half + t % 2] = total;
    }
  }
}

// GCC 12 warns that the shuffle intrinsics' unused mask operand is uninitialised
// (an artefact of their definition in avx512fintrin.h); silenced here only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Lane t of the result = the sum of the 16 lanes of a[t]: a transposing tree of adds
// (45 instructions for 16 sums).
__attribute__((target("avx512f"))) inline __m512 sum_each(const __m512* a) {
  __m512 x[8], y[4], w[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane L: a_2i[L] and a_2i+1[L] half-summed
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane L: the lane-L sums of a_4i .. a_4i+3
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0x44), _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; ++i)  // pairs of 128-bit lanes added
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
}

// AVX-512 dot products: 16 accumulators, 8 loads per 16 FMAs.
__attribute__((target("avx512f"))) void dot_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                                     int64_t ldb, float* tile) {
  __m512 acc[16];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  const float* a0 = a;
  const float* a1 = a + lda;
  const float* a2 = a + 2 * lda;
  const float* a3 = a + 3 * lda;
  const float* b0 = b;
  const float* b1 = b + ldb;
  const float* b2 = b + 2 * ldb;
  const float* b3 = b + 3 * ldb;
  for (int64_t p = 0; p < kc; p += 16) {
    const __m512 v0 = _mm512_loadu_ps(b0 + p), v1 = _mm512_loadu_ps(b1 + p), v2 = _mm512_loadu_ps(b2 + p),
                 v3 = _mm512_loadu_ps(b3 + p);
    __m512 u = _mm512_loadu_ps(a0 + p);
    acc[0] = _mm512_fmadd_ps(u, v0, acc[0]);
    acc[1] = _mm512_fmadd_ps(u, v1, acc[1]);
    acc[2] = _mm512_fmadd_ps(u, v2, acc[2]);
    acc[3] = _mm512_fmadd_ps(u, v3, acc[3]);
    u = _mm512_loadu_ps(a1 + p);
    acc[4] = _mm512_fmadd_ps(u, v0, acc[4]);
    acc[5] = _mm512_fmadd_ps(u, v1, acc[5]);
    acc[6] = _mm512_fmadd_ps(u, v2, acc[6]);
    acc[7] = _mm512_fmadd_ps(u, v3, acc[7]);
    u = _mm512_loadu_ps(a2 + p);
    acc[8] = _mm512_fmadd_ps(u, v0, acc[8]);
    acc[9] = _mm512_fmadd_ps(u, v1, acc[9]);
    acc[10] = _mm512_fmadd_ps(u, v2, acc[10]);
    acc[11] = _mm512_fmadd_ps(u, v3, acc[11]);
    u = _mm512_loadu_ps(a3 + p);
    acc[12] = _mm512_fmadd_ps(u, v0, acc[12]);
    acc[13] = _mm512_fmadd_ps(u, v1, acc[13]);
    acc[14] = _mm512_fmadd_ps(u, v2, acc[14]);
    acc[15] = _mm512_fmadd_ps(u, v3, acc[15]);
  }
  _mm512_storeu_ps(tile, sum_each(acc));
}

#pragma GCC diagnostic pop

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
// load_b(p, &b0, &b1) fetches B's row p.
template <class LoadB>
__attribute__((target("avx512f"), always_inline)) inline void avx512_8x32(int64_t kc, const float* a, LoadB load_b,
                                                                           float* tile) {
  __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
         c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
         c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
         c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),
         c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),
         c71 = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b0, b1;
    load_b(p, &b0, &b1);
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

__attribute__((target("avx512f"))) void kernel_avx512_8x32(int64_t kc, const float* a, const float* b,
                                                             float* tile) {
  avx512_8x32(
      kc, a,
      [b](int64_t p, __m512* b0, __m512* b1) __attribute__((target("avx512f"), always_inline)) {
        *b0 = _mm512_loadu_ps(b + p * 32);
        *b1 = _mm512_loadu_ps(b + p * 32 + 16);
      },
      tile);
}

#endif  // MPLAN_X86_KERNELS

MicroKernel choose() {
#ifdef MPLAN_X86_KERNELS
  if (kernel_isa() == Isa::avx512) return {8, 32, "avx512 8x32", kernel_avx512_8x32};
  if (kernel_isa() == Isa::avx2) return {6, 16, "avx2 6x16", kernel_avx2_6x16};
#endif
  return {4, 8, "portable 4x8", kernel_portable};
}

}  // namespace

const MicroKernel& micro_kernel() {
  static const MicroKernel kernel = choose();
  return kernel;
}

DotKernel dot_kernel() {
  static const DotKernel kernel = [] {
#ifdef MPLAN_X86_KERNELS
    if (kernel_isa() == Isa::avx512) return static_cast<DotKernel>(dot_avx512);
    if (kernel_isa() == Isa::avx2) return static_cast<DotKernel>(dot_avx2);
#endif
    return static_cast<DotKernel>(dot_portable);
  }();
  return kernel;
}

}  // namespace mplan::rt::cpu
