#pragma once
// The CUDA backend's kernels of the channel ops (runtime/ops_channel.h), in
// channel_ops.cu, named and computing as runtime/cpu/channel_kernels.h.
//
// Host-callable launchers like runtime/cuda/kernels.h: each enqueues on
// `stream` and checks the launch.

#include <cuda_runtime.h>

#include <cstdint>

namespace mplan::rt::cuda {

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

}  // namespace mplan::rt::cuda
