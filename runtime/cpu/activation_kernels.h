#pragma once
// The CPU kernels of runtime/ops_activations.h (which says what each computes),
// in activations.cpp: plain synchronous functions with the API's arguments less
// the context; runtime/cpu/ops_activations.cpp runs them on the CPU streams.

#include <cstdint>

namespace mplan::rt::cpu {

// ---- activations (activations.cpp) --------------------------------------------------------

void hardswish_forward(const float* x, float* y, int64_t count);
void hardswish_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void hardsigmoid_forward(const float* x, float* y, int64_t count);
void hardsigmoid_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void silu_forward(const float* x, float* y, int64_t count);
void silu_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate);
void sigmoid_forward(const float* x, float* y, int64_t count);
void sigmoid_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate);
void gelu_forward(const float* x, float* y, int64_t count, bool tanh_approximation);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t count, bool tanh_approximation,
                   bool accumulate);
void clip_forward(const float* x, float* y, int64_t count, float min, float max);
void clip_backward(const float* y, const float* dy, float* dx, int64_t count, float min, float max, bool accumulate);

}  // namespace mplan::rt::cpu
