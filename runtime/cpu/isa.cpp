#include "runtime/cpu/isa.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace mplan::rt::cpu {
namespace {

Isa supported() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // BMI2 with AVX-512F: the depthwise and im2col paths use _bzhi for lane masks.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::portable;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::portable: return "portable";
  }
  return "portable";
}

Isa kernel_isa() {
  static const Isa isa = [] {
    const Isa best = supported();
    const char* cap = std::getenv("MPLAN_CPU_ISA");
    if (cap == nullptr || *cap == '\0') return best;
    for (Isa candidate : {Isa::portable, Isa::avx2, Isa::avx512})
      if (std::strcmp(cap, isa_name(candidate)) == 0) return candidate < best ? candidate : best;
    std::fprintf(stderr, "mplan runtime: MPLAN_CPU_ISA='%s' is not avx512, avx2 or portable: ignored\n", cap);
    return best;
  }();
  return isa;
}

}  // namespace mplan::rt::cpu
