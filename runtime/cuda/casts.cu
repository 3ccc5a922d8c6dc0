// The casts of 16-bit programs on CUDA (cast_kernels.h): one thread per
// element, CUDA's own round-to-nearest-even conversions.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// The storage types of runtime/ops_casts.h.
constexpr int64_t kFloat32 = 0, kBfloat16 = 1;

__device__ __forceinline__ float load_element(const uint8_t* src, int64_t i, int64_t stored) {
  if (stored == kFloat32) return reinterpret_cast<const float*>(src)[i];
  if (stored == kBfloat16) return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(src)[i]);
  return __half2float(reinterpret_cast<const __half*>(src)[i]);
}

__device__ __forceinline__ float rounded_through(float x, int64_t type) {
  if (type == kFloat32) return x;
  if (type == kBfloat16) return __bfloat162float(__float2bfloat16_rn(x));
  return __half2float(__float2half_rn(x));
}

__global__ void cast_to_float_kernel(const uint8_t* src, float* dst, int64_t count, int64_t stored, int64_t rounded) {
  MPLAN_FOR_EACH(i, count) dst[i] = rounded_through(load_element(src, i, stored), rounded);
}

__global__ void cast_from_float_kernel(const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result,
                                       bool accumulate) {
  MPLAN_FOR_EACH(i, count) {
    float v = rounded_through(src[i], result);
    if (accumulate) v = __fadd_rn(load_element(dst, i, stored), v);
    if (stored == kFloat32)
      reinterpret_cast<float*>(dst)[i] = v;
    else if (stored == kBfloat16)
      reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(v);
    else
      reinterpret_cast<__half*>(dst)[i] = __float2half_rn(v);
  }
}

__global__ void zero_floats_kernel(float* dst, int64_t count) {
  MPLAN_FOR_EACH(i, count) dst[i] = 0.0f;
}

__global__ void broadcast_rows_16_kernel(const uint16_t* bias, uint16_t* y, int64_t n, int64_t out) {
  MPLAN_FOR_EACH(i, n * out) y[i] = bias[i % out];
}

__global__ void broadcast_channels_16_kernel(const uint16_t* bias, uint16_t* y, int64_t n, int64_t k, int64_t hw) {
  MPLAN_FOR_EACH(i, n * k * hw) y[i] = bias[(i / hw) % k];
}

}  // namespace

void cast_to_float(const uint8_t* src, float* dst, int64_t count, int64_t stored, int64_t rounded,
                   cudaStream_t stream) {
  MPLAN_LAUNCH(cast_to_float_kernel, count, src, dst, count, stored, rounded);
}

void cast_from_float(const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result, bool accumulate,
                     cudaStream_t stream) {
  MPLAN_LAUNCH(cast_from_float_kernel, count, src, dst, count, stored, result, accumulate);
}

void zero_floats(float* dst, int64_t count, cudaStream_t stream) { MPLAN_LAUNCH(zero_floats_kernel, count, dst, count); }

void broadcast_channels_16(const uint8_t* bias, uint8_t* y, int64_t n, int64_t k, int64_t hw, cudaStream_t stream) {
  MPLAN_LAUNCH(broadcast_channels_16_kernel, n * k * hw, reinterpret_cast<const uint16_t*>(bias),
               reinterpret_cast<uint16_t*>(y), n, k, hw);
}

void broadcast_rows_16(const uint8_t* bias, uint8_t* y, int64_t n, int64_t out, cudaStream_t stream) {
  MPLAN_LAUNCH(broadcast_rows_16_kernel, n * out, reinterpret_cast<const uint16_t*>(bias),
               reinterpret_cast<uint16_t*>(y), n, out);
}

}  // namespace mplan::rt::cuda
