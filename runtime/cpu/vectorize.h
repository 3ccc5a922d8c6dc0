#pragma once
// MPLAN_VECTOR_CLONES before a hot loop's function compiles it three times, for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline, and picks the clone
// the CPU runs when the program starts (GCC's and Clang's target_clones), so the
// runtime vectorises for the machine without -march=native and still runs on any
// x86-64. Elsewhere it is empty. Loops are written to vectorise: no branches on
// flags inside them, independent partial sums for reductions.

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define MPLAN_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MPLAN_VECTOR_CLONES
#endif
