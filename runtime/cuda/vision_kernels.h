#pragma once
// The CUDA backend's own kernels for the vision-model ops (runtime/ops_vision.h),
// host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch. Semantics are those of the CPU kernels of
// runtime/cpu/vision_kernels.h, named by the same words; the GEMMs of matmul,
// attention and patch embedding are cuBLAS calls in runtime/cuda/ops_vision.cpp.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

// ---- activations (vision_activations.cu) ---------------------------------------------------

enum class Activation : int { hardswish, hardsigmoid, silu, sigmoid, gelu, gelu_tanh, clip };
// y = f(x); clip takes its range as (low, high), the others ignore them.
void activation_forward(Activation f, const float* x, float* y, int64_t count, float low, float high,
                        cudaStream_t stream);
// dx = f'(...) * dy from `in`, the input x or (sigmoid, clip) the output y.
void activation_backward(Activation f, const float* in, const float* dy, float* dx, int64_t count, float low,
                         float high, bool accumulate, cudaStream_t stream);

// ---- channel ops (vision_channel.cu) ------------------------------------------------------

void channel_mul_forward(const float* x, const float* s, float* y, int64_t n, int64_t c, int64_t inner,
                         bool s_per_sample, cudaStream_t stream);
void channel_mul_backward_x(const float* s, const float* dy, float* dx, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate, cudaStream_t stream);
void channel_mul_backward_s(const float* x, const float* dy, float* ds, int64_t n, int64_t c, int64_t inner,
                            bool s_per_sample, bool accumulate, cudaStream_t stream);
void adaptive_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                               int64_t out_w, cudaStream_t stream);
// Each input element gathers from the windows that contain it.
void adaptive_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool accumulate, cudaStream_t stream);
void channel_shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t inner, int64_t groups, bool accumulate,
                     cudaStream_t stream);
void slice_forward(const float* x, float* y, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                   cudaStream_t stream);
void slice_backward(const float* dy, float* dx, int64_t outer, int64_t x_cols, int64_t offset, int64_t y_cols,
                    bool accumulate, cudaStream_t stream);
void class_token_forward(const float* x, const float* token, float* y, int64_t n, int64_t tokens, int64_t dim,
                         cudaStream_t stream);
void class_token_backward_data(const float* dy, float* dx, int64_t n, int64_t tokens, int64_t dim, bool accumulate,
                               cudaStream_t stream);
void class_token_backward_param(const float* dy, float* dtoken, int64_t n, int64_t tokens, int64_t dim,
                                cudaStream_t stream);
void pos_embed_forward(const float* x, const float* p, float* y, int64_t n, int64_t count, cudaStream_t stream);
// The patches of x (n, c, height, width) as rows (n*tokens, c*patch*patch);
// fold: dx from the rows (zero, or kept when accumulating, outside the patches).
void unfold_patches(const float* x, float* rows, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                    cudaStream_t stream);
void fold_patches(const float* rows, float* dx, int64_t n, int64_t c, int64_t height, int64_t width, int64_t patch,
                  bool accumulate, cudaStream_t stream);

// ---- normalisation and softmax (vision_norm.cu) --------------------------------------------

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* invstd,
                       int64_t outer, int64_t c, int64_t inner, float eps, cudaStream_t stream);
void layernorm_backward_data(const float* x, const float* gamma, const float* mean, const float* invstd,
                             const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner, bool accumulate,
                             cudaStream_t stream);
void layernorm_backward_params(const float* x, const float* mean, const float* invstd, const float* dy,
                               float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner,
                               cudaStream_t stream);
// Row softmax, y may equal x.
void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
// dx = y * (dy - sum(dy * y)) per row; dx may equal dy (attention's dP -> dS in place).
void softmax_rows_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate,
                           cudaStream_t stream);

}  // namespace mplan::rt::cuda
