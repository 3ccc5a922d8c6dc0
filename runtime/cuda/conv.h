#pragma once
// What the CUDA backend's convolutions tell beyond runtime/ops.h: how many
// calls ran another algorithm than the one asked for (its workspace did not
// fit, or cuDNN refused it at run time although it gave a workspace size).
// The kernel profiler drops an algorithm whose timed runs moved this count,
// so a time is never filed under an algorithm that did not run.

#include <cstdint>

namespace mplan::rt::cuda {

int64_t conv_fallback_count();

}  // namespace mplan::rt::cuda
