// The CUDA backend of runtime/ops_activations.h: one launcher per direction
// (activation_kernels.h), the function chosen by an enum. Every op enqueues
// on its context's stream and returns.

#include "runtime/cuda/activation_kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

using cuda::Activation;
using cuda::Launch;

void activation(const Context& ctx, Activation f, const float* x, float* y, int64_t count, float low = 0,
                float high = 0) {
  Launch L(ctx);
  cuda::activation_forward(f, x, y, count, low, high, L.stream());
}
void activation_grad(const Context& ctx, Activation f, const float* in, const float* dy, float* dx, int64_t count,
                     bool accumulate, float low = 0, float high = 0) {
  Launch L(ctx);
  cuda::activation_backward(f, in, dy, dx, count, low, high, accumulate, L.stream());
}

}  // namespace

void hardswish_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::hardswish, x, y, count);
}
void hardswish_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                        bool accumulate) {
  activation_grad(ctx, Activation::hardswish, x, dy, dx, count, accumulate);
}
void hardsigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::hardsigmoid, x, y, count);
}
void hardsigmoid_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                          bool accumulate) {
  activation_grad(ctx, Activation::hardsigmoid, x, dy, dx, count, accumulate);
}
void silu_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::silu, x, y, count);
}
void silu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count, bool accumulate) {
  activation_grad(ctx, Activation::silu, x, dy, dx, count, accumulate);
}
void sigmoid_forward(const Context& ctx, const float* x, float* y, int64_t count) {
  activation(ctx, Activation::sigmoid, x, y, count);
}
void sigmoid_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  activation_grad(ctx, Activation::sigmoid, y, dy, dx, count, accumulate);
}
void gelu_forward(const Context& ctx, const float* x, float* y, int64_t count, bool tanh_approximation) {
  activation(ctx, tanh_approximation ? Activation::gelu_tanh : Activation::gelu, x, y, count);
}
void gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, int64_t count,
                   bool tanh_approximation, bool accumulate) {
  activation_grad(ctx, tanh_approximation ? Activation::gelu_tanh : Activation::gelu, x, dy, dx, count, accumulate);
}
void clip_forward(const Context& ctx, const float* x, float* y, int64_t count, float min, float max) {
  activation(ctx, Activation::clip, x, y, count, min, max);
}
void clip_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t count, float min, float max,
                   bool accumulate) {
  activation_grad(ctx, Activation::clip, y, dy, dx, count, accumulate, min, max);
}

}  // namespace mplan::rt
