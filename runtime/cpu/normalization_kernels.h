#pragma once
// The CPU kernels of runtime/ops_normalization.h (which says what each computes),
// in layernorm.cpp: plain synchronous functions with the API's arguments less
// the context; runtime/cpu/ops_normalization.cpp runs them on the CPU streams.
// Sums over many terms accumulate in double, as the other CPU kernels do.

#include <cstdint>

namespace mplan::rt::cpu {

// ---- layer normalisation (layernorm.cpp) ---------------------------------------------------

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps);
void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate);
void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner);

}  // namespace mplan::rt::cpu
