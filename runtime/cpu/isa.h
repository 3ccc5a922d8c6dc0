// The instruction set the CPU backend's hand-written kernels use
// (gemm_kernel.cpp, im2col.cpp, conv_depthwise.cpp): the best this CPU has,
// capped by MPLAN_CPU_ISA (avx512, avx2 or portable) so that the fallbacks
// can be run and tested on a machine that has AVX-512. Read once per process.
#pragma once

namespace mplan::rt::cpu {

enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };

Isa kernel_isa();
const char* isa_name(Isa isa);

}  // namespace mplan::rt::cpu
