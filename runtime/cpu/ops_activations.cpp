// The CPU backend of runtime/ops_activations.h: each op captures its arguments
// by value and runs its kernel (runtime/cpu/activation_kernels.h) when the
// stream reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/activation_kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::hardswish_forward(x, y, count); });
}

void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  launch(ctx, [=] { cpu::hardswish_backward(x, dy, dx, count, accumulate); });
}

void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::hardsigmoid_forward(x, y, count); });
}

void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate) {
  launch(ctx, [=] { cpu::hardsigmoid_backward(x, dy, dx, count, accumulate); });
}

void silu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::silu_forward(x, y, count); });
}

void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::silu_backward(x, dy, dx, count, accumulate); });
}

void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  launch(ctx, [=] { cpu::sigmoid_forward(x, y, count); });
}

void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  launch(ctx, [=] { cpu::sigmoid_backward(y, dy, dx, count, accumulate); });
}

void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation) {
  launch(ctx, [=] { cpu::gelu_forward(x, y, count, tanh_approximation); });
}

void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate) {
  launch(ctx, [=] { cpu::gelu_backward(x, dy, dx, count, tanh_approximation, accumulate); });
}

void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max) {
  launch(ctx, [=] { cpu::clip_forward(x, y, count, min, max); });
}

void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min, float max,
                   bool accumulate) {
  launch(ctx, [=] { cpu::clip_backward(y, dy, dx, count, min, max, accumulate); });
}

}  // namespace mplan::rt
