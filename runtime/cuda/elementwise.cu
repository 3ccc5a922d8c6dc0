// Element-wise and small reduction kernels of the CUDA backend (kernels.h):
// each mirrors the CPU kernel named beside it, operation for operation.
// Multiply-adds the CPU does as two roundings are written with __fmul_rn /
// __fadd_rn, which nvcc never contracts into an FMA (and the backend builds
// with --fmad=false), so where the CPU build does not contract either these
// kernels give the CPU's bits, not merely its values.

#include <cmath>
#include <initializer_list>

#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/dropout_hash.h"

namespace mplan::rt::cuda {
namespace {

__global__ void fill_words_kernel(uint32_t* dst, uint32_t pattern, int64_t words) {
  MPLAN_FOR_EACH(i, words) dst[i] = pattern;
}

// Byte by byte where dst is not 4-aligned: byte b of word i is the pattern's
// little-endian byte b % 4 (as the CPU's memcpy of the word writes it).
__global__ void fill_bytes_kernel(unsigned char* dst, uint32_t pattern, int64_t word_bytes, int64_t bytes) {
  MPLAN_FOR_EACH(b, bytes) {
    dst[b] = b < word_bytes ? static_cast<unsigned char>((pattern >> (8 * (b % 4))) & 0xffu)
                            : static_cast<unsigned char>(pattern & 0xffu);
  }
}

// The CPU's x > 0 ? x : 0, except that NaN propagates (as cuDNN's
// CUDNN_PROPAGATE_NAN did), so that --debug-poison sees a poisoned input downstream.
__device__ __forceinline__ float relu_of(float x) { return x <= 0.0f ? 0.0f : x; }

__global__ void relu_kernel(const float* x, float* y, int64_t count) {
  MPLAN_FOR_EACH(i, count) y[i] = relu_of(x[i]);
}

__global__ void relu4_kernel(const float4* x, float4* y, int64_t count4) {
  MPLAN_FOR_EACH(i, count4) {
    const float4 v = x[i];
    y[i] = make_float4(relu_of(v.x), relu_of(v.y), relu_of(v.z), relu_of(v.w));
  }
}

__global__ void copy4_kernel(const float4* src, float4* dst, int64_t count4) {
  MPLAN_FOR_EACH(i, count4) dst[i] = src[i];
}

__global__ void copy_bytes_kernel(const unsigned char* src, unsigned char* dst, int64_t bytes) {
  MPLAN_FOR_EACH(b, bytes) dst[b] = src[b];
}

__global__ void add_kernel(const float* src, float* dst, int64_t count) {
  MPLAN_FOR_EACH(i, count) dst[i] = __fadd_rn(dst[i], src[i]);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t count, bool accumulate) {
  MPLAN_FOR_EACH(i, count) {
    const float g = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
  }
}

// The same, four elements per load and store where every pointer is 16-byte
// aligned (arena blocks are 256-byte aligned): ReLU's backward went from 0.52
// ms on the H100 to 0.29 ms on the H200 for 411 MB tensors, 4.2 TB/s
// (docs/gpu-validation.md). Element i's arithmetic is unchanged.
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}
__device__ __forceinline__ float relu_gradient(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

__global__ void add4_kernel(const float4* src, float4* dst, int64_t count4) {
  MPLAN_FOR_EACH(i, count4) dst[i] = add4(dst[i], src[i]);
}

__global__ void add_two_kernel(const float* a, const float* b, float* y, int64_t count) {
  MPLAN_FOR_EACH(i, count) y[i] = __fadd_rn(a[i], b[i]);
}

__global__ void add_two4_kernel(const float4* a, const float4* b, float4* y, int64_t count4) {
  MPLAN_FOR_EACH(i, count4) y[i] = add4(a[i], b[i]);
}

__global__ void relu_backward4_kernel(const float4* y, const float4* dy, float4* dx, int64_t count4, bool accumulate) {
  MPLAN_FOR_EACH(i, count4) {
    const float4 v = y[i], d = dy[i];
    const float4 g = make_float4(relu_gradient(v.x, d.x), relu_gradient(v.y, d.y), relu_gradient(v.z, d.z),
                                 relu_gradient(v.w, d.w));
    dx[i] = accumulate ? add4(dx[i], g) : g;
  }
}

// How many leading elements the four-wide kernels take: a multiple of 4 where
// every pointer is 16-byte aligned, else none; the scalar kernel does the rest.
int64_t four_wide_part(int64_t count, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  return count / 4 * 4;
}

// The compact ReLU (docs/planner.md, "Memory-saving variants"): y as
// relu_kernel, and bit k of mask[b] = (y[8b + k] > 0) (NaN gives 0). One
// thread per mask byte, i.e. per eight elements, so no two threads write one
// byte and no atomics are needed; bits past count stay 0.
__device__ __forceinline__ unsigned relu_bit(float y, int k) { return y > 0.0f ? 1u << k : 0u; }

// Eight elements per thread as two float4 where x and y are 16-byte aligned.
__global__ void relu_mask8_kernel(const float4* x, float4* y, uint8_t* mask, int64_t bytes) {
  MPLAN_FOR_EACH(b, bytes) {
    const float4 u = x[2 * b], v = x[2 * b + 1];
    const float4 ru = make_float4(relu_of(u.x), relu_of(u.y), relu_of(u.z), relu_of(u.w));
    const float4 rv = make_float4(relu_of(v.x), relu_of(v.y), relu_of(v.z), relu_of(v.w));
    y[2 * b] = ru;
    y[2 * b + 1] = rv;
    mask[b] = static_cast<uint8_t>(relu_bit(ru.x, 0) | relu_bit(ru.y, 1) | relu_bit(ru.z, 2) | relu_bit(ru.w, 3) |
                                   relu_bit(rv.x, 4) | relu_bit(rv.y, 5) | relu_bit(rv.z, 6) | relu_bit(rv.w, 7));
  }
}

__global__ void relu_mask_kernel(const float* x, float* y, uint8_t* mask, int64_t count) {
  MPLAN_FOR_EACH(b, (count + 7) / 8) {
    unsigned bits = 0;
    for (int k = 0; k < 8; ++k) {
      const int64_t i = 8 * b + k;
      if (i >= count) break;
      const float v = relu_of(x[i]);
      y[i] = v;
      bits |= relu_bit(v, k);
    }
    mask[b] = static_cast<uint8_t>(bits);
  }
}

// relu_backward_kernel with y[i] > 0 replaced by bit i of the mask.
__device__ __forceinline__ float masked_gradient(unsigned bits, int k, float dy) {
  return (bits >> k) & 1u ? dy : 0.0f;
}

__global__ void relu_backward_mask_kernel(const uint8_t* mask, const float* dy, float* dx, int64_t count,
                                          bool accumulate) {
  MPLAN_FOR_EACH(i, count) {
    const float g = masked_gradient(mask[i >> 3], static_cast<int>(i & 7), dy[i]);
    dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
  }
}

// Eight elements (one mask byte) per thread as two float4 where dy and dx are
// 16-byte aligned; element i's arithmetic is the scalar kernel's.
__global__ void relu_backward_mask8_kernel(const uint8_t* mask, const float4* dy, float4* dx, int64_t bytes,
                                           bool accumulate) {
  MPLAN_FOR_EACH(b, bytes) {
    const unsigned bits = mask[b];
    const float4 d0 = dy[2 * b], d1 = dy[2 * b + 1];
    const float4 g0 = make_float4(masked_gradient(bits, 0, d0.x), masked_gradient(bits, 1, d0.y),
                                  masked_gradient(bits, 2, d0.z), masked_gradient(bits, 3, d0.w));
    const float4 g1 = make_float4(masked_gradient(bits, 4, d1.x), masked_gradient(bits, 5, d1.y),
                                  masked_gradient(bits, 6, d1.z), masked_gradient(bits, 7, d1.w));
    dx[2 * b] = accumulate ? add4(dx[2 * b], g0) : g0;
    dx[2 * b + 1] = accumulate ? add4(dx[2 * b + 1], g1) : g1;
  }
}

__global__ void broadcast_rows_kernel(const float* bias, float* y, int64_t n, int64_t out) {
  MPLAN_FOR_EACH(i, n * out) y[i] = bias[i % out];
}

// One thread per column, summing down the rows in double (linear.cpp's loop).
__global__ void sum_rows_into_kernel(const float* dy, float* dbias, int64_t n, int64_t out) {
  MPLAN_FOR_EACH(o, out) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b) sum += dy[b * out + o];
    dbias[o] = static_cast<float>(dbias[o] + sum);
  }
}

__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t planes, int64_t hw) {
  MPLAN_FOR_EACH(plane, planes) {
    double sum = 0.0;
    for (int64_t i = 0; i < hw; ++i) sum += x[plane * hw + i];
    y[plane] = static_cast<float>(sum / hw);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t hw,
                                                bool accumulate) {
  MPLAN_FOR_EACH(i, planes * hw) {
    const float g = dy[i / hw] / static_cast<float>(hw);
    dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
  }
}

__global__ void dropout_forward_kernel(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                                       int64_t first_sample, float p, float scale, uint64_t seed, uint64_t step) {
  MPLAN_FOR_EACH(at, n * sample_elements) {
    const int64_t b = at / sample_elements, e = at % sample_elements;
    const uint64_t sample = static_cast<uint64_t>(first_sample + b);
    const bool keep = dropout_hash_uniform(seed, step, sample, static_cast<uint64_t>(e)) >= p;
    mask[at] = keep ? 1 : 0;
    y[at] = keep ? __fmul_rn(x[at], scale) : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const uint8_t* mask, const float* dy, float* dx, int64_t count, float scale,
                                        bool accumulate) {
  MPLAN_FOR_EACH(i, count) {
    const float g = mask[i] ? __fmul_rn(dy[i], scale) : 0.0f;
    dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
  }
}

__global__ void concat_forward_kernel(const float* x, float* y, int64_t n, int64_t total_channels,
                                      int64_t channel_offset, int64_t channels, int64_t hw) {
  const int64_t image = channels * hw;
  MPLAN_FOR_EACH(i, n * image) {
    const int64_t b = i / image, r = i % image;
    y[(b * total_channels + channel_offset) * hw + r] = x[i];
  }
}

__global__ void concat_backward_kernel(const float* dy, float* dx, int64_t n, int64_t total_channels,
                                       int64_t channel_offset, int64_t channels, int64_t hw, bool accumulate) {
  const int64_t image = channels * hw;
  MPLAN_FOR_EACH(i, n * image) {
    const int64_t b = i / image, r = i % image;
    const float g = dy[(b * total_channels + channel_offset) * hw + r];
    dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
  }
}

// One block: each thread takes samples b, b + blockDim.x, ...; per sample the
// max, the sum of exp (each in float, summed in double: double exp is slow on
// most GPUs) and log(sum) - (z[label] - max) as the CPU; the samples' terms
// are summed by a tree, so the loss is the CPU's to rounding, not to the bit.
constexpr int kLossThreads = 256;
__global__ void softmax_xent_loss_kernel(const float* logits, const int32_t* labels, float* loss, int64_t n,
                                         int64_t classes, float label_smoothing) {
  const double e = label_smoothing;
  __shared__ double partial[kLossThreads];
  double local = 0.0;
  for (int64_t b = threadIdx.x; b < n; b += blockDim.x) {
    const float* z = logits + b * classes;
    float top = z[0];
    for (int64_t j = 1; j < classes; ++j) top = z[j] > top ? z[j] : top;
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum += static_cast<double>(expf(z[j] - top));
    const int32_t label = labels[b];
    if (label < 0 || label >= classes) {
      local += nan("");  // the CPU aborts; here the loss turns NaN and the program stops on it
    } else if (e == 0) {
      local += log(sum) - (static_cast<double>(z[label]) - top);
    } else {
      double shifted = 0.0;
      for (int64_t j = 0; j < classes; ++j) shifted += static_cast<double>(z[j]) - top;
      const double log_sum = log(sum);
      local += (1 - e) * (log_sum - (static_cast<double>(z[label]) - top)) +
               e / static_cast<double>(classes) * (static_cast<double>(classes) * log_sum - shifted);
    }
  }
  partial[threadIdx.x] = local;
  __syncthreads();
  for (int half = kLossThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = static_cast<float>(partial[0]);
}

// The evaluation's sums (runtime/ops.h softmax_xent_evaluate): one block.
__global__ void softmax_xent_metrics_kernel(const float* logits, const int32_t* labels, float* metrics, int64_t n,
                                            int64_t classes, float label_smoothing) {
  const double e = label_smoothing;
  __shared__ double partial[4][kLossThreads];
  double local[4] = {0.0, 0.0, 0.0, 0.0};
  for (int64_t b = threadIdx.x; b < n; b += blockDim.x) {
    const int32_t label = labels[b];
    if (label < 0) continue;  // the padding of a last, partial batch
    const float* z = logits + b * classes;
    if (label >= classes) {
      local[0] += nan("");
      continue;
    }
    float top = z[0];
    for (int64_t j = 1; j < classes; ++j) top = z[j] > top ? z[j] : top;
    double sum = 0.0, shifted = 0.0;
    int64_t above = 0;
    for (int64_t j = 0; j < classes; ++j) {
      sum += static_cast<double>(expf(z[j] - top));
      shifted += static_cast<double>(z[j]) - top;
      above += z[j] > z[label] ? 1 : 0;
    }
    const double log_sum = log(sum), own = log_sum - (static_cast<double>(z[label]) - top);
    local[0] += e == 0 ? own : (1 - e) * own + e / static_cast<double>(classes) * (classes * log_sum - shifted);
    local[1] += above < 1 ? 1.0 : 0.0;
    local[2] += above < 5 ? 1.0 : 0.0;
    local[3] += 1.0;
  }
  for (int k = 0; k < 4; ++k) partial[k][threadIdx.x] = local[k];
  __syncthreads();
  for (int half = kLossThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      for (int k = 0; k < 4; ++k) partial[k][threadIdx.x] += partial[k][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x < 4) metrics[threadIdx.x] = static_cast<float>(partial[threadIdx.x][0]);
}

__global__ void softmax_xent_grad_kernel(const float* probs, const int32_t* labels, float* dlogits, int64_t n,
                                         int64_t classes, float scale, bool accumulate, float label_smoothing) {
  const float spread = __fdiv_rn(label_smoothing, static_cast<float>(classes));
  const float hit = __fadd_rn(__fsub_rn(1.0f, label_smoothing), spread);
  MPLAN_FOR_EACH(at, n * classes) {
    const int64_t b = at / classes, j = at % classes;
    const float g = __fmul_rn(__fsub_rn(probs[at], j == labels[b] ? hit : spread), scale);
    dlogits[at] = accumulate ? __fadd_rn(dlogits[at], g) : g;
  }
}

__global__ void sgd_step_kernel(float* w, float* g, float* momentum_buf, int64_t count, float lr, float momentum,
                                float weight_decay, bool first_step, bool nesterov) {
  MPLAN_FOR_EACH(i, count) {
    float d = g[i];
    if (weight_decay != 0.0f) d = __fadd_rn(d, __fmul_rn(weight_decay, w[i]));
    if (momentum != 0.0f) {
      const float buf = first_step ? d : __fadd_rn(__fmul_rn(momentum, momentum_buf[i]), d);
      momentum_buf[i] = buf;
      d = nesterov ? __fadd_rn(d, __fmul_rn(momentum, buf)) : buf;
    }
    w[i] = __fsub_rn(w[i], __fmul_rn(lr, d));
    g[i] = 0.0f;  // the next iteration's sub-batches accumulate into a clean gradient
  }
}

__global__ void adamw_step_kernel(float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float decay,
                                  float beta1, float beta2, float keep1, float keep2, float eps, float correction2_sqrt,
                                  float step_size) {
  MPLAN_FOR_EACH(i, count) {
    const float gi = g[i];
    const float wi = __fmul_rn(w[i], decay);
    const float m = __fadd_rn(__fmul_rn(beta1, exp_avg[i]), __fmul_rn(keep1, gi));
    const float v = __fadd_rn(__fmul_rn(beta2, exp_avg_sq[i]), __fmul_rn(__fmul_rn(keep2, gi), gi));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), correction2_sqrt), eps);
    w[i] = __fsub_rn(wi, __fmul_rn(step_size, __fdiv_rn(m, denom)));
    g[i] = 0.0f;  // the next iteration's sub-batches accumulate into a clean gradient
  }
}

}  // namespace

void fill_u32(void* dst, uint32_t pattern, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const size_t words = bytes / 4;
  if (reinterpret_cast<uintptr_t>(dst) % 4 == 0) {
    if (words > 0) {
      fill_words_kernel<<<blocks_for(static_cast<int64_t>(words)), kThreads, 0, stream>>>(
          static_cast<uint32_t*>(dst), pattern, static_cast<int64_t>(words));
      MPLAN_CUDA_CHECK_LAUNCH();
    }
    if (bytes > 4 * words) {  // the tail bytes: the pattern's low byte, as memset (a kernel: see copy_bytes)
      fill_bytes_kernel<<<1, kThreads, 0, stream>>>(static_cast<unsigned char*>(dst) + 4 * words, pattern, 0,
                                                    static_cast<int64_t>(bytes - 4 * words));
      MPLAN_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  fill_bytes_kernel<<<blocks_for(static_cast<int64_t>(bytes)), kThreads, 0, stream>>>(
      static_cast<unsigned char*>(dst), pattern, static_cast<int64_t>(4 * words), static_cast<int64_t>(bytes));
  MPLAN_CUDA_CHECK_LAUNCH();
}

void copy_bytes(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  const int64_t wide = static_cast<int64_t>(four_wide_part(static_cast<int64_t>(bytes / 4), {src, dst})) * 4;
  if (wide > 0) {
    copy4_kernel<<<blocks_for(wide / 16), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(from),
                                                                 reinterpret_cast<float4*>(to), wide / 16);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  const int64_t rest = static_cast<int64_t>(bytes) - wide;
  if (rest <= 0) return;
  copy_bytes_kernel<<<blocks_for(rest), kThreads, 0, stream>>>(from + wide, to + wide, rest);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void relu_forward(const float* x, float* y, int64_t count, cudaStream_t stream) {
  const int64_t four_wide = four_wide_part(count, {x, y});
  if (four_wide > 0) {
    relu4_kernel<<<blocks_for(four_wide / 4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                                     reinterpret_cast<float4*>(y), four_wide / 4);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  if (count <= four_wide) return;
  relu_kernel<<<blocks_for(count - four_wide), kThreads, 0, stream>>>(x + four_wide, y + four_wide,
                                                                      count - four_wide);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void add_two(const float* a, const float* b, float* y, int64_t count, cudaStream_t stream) {
  const int64_t four_wide = four_wide_part(count, {a, b, y});
  if (four_wide > 0) {
    add_two4_kernel<<<blocks_for(four_wide / 4), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(y),
        four_wide / 4);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  if (count <= four_wide) return;
  add_two_kernel<<<blocks_for(count - four_wide), kThreads, 0, stream>>>(a + four_wide, b + four_wide,
                                                                         y + four_wide, count - four_wide);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void add(const float* src, float* dst, int64_t count, cudaStream_t stream) {
  const int64_t four_wide = four_wide_part(count, {src, dst});
  if (four_wide > 0) {
    add4_kernel<<<blocks_for(four_wide / 4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(src),
                                                                    reinterpret_cast<float4*>(dst), four_wide / 4);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  if (count <= four_wide) return;
  add_kernel<<<blocks_for(count - four_wide), kThreads, 0, stream>>>(src + four_wide, dst + four_wide,
                                                                     count - four_wide);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t count, bool accumulate, cudaStream_t stream) {
  const int64_t four_wide = four_wide_part(count, {y, dy, dx});
  if (four_wide > 0) {
    relu_backward4_kernel<<<blocks_for(four_wide / 4), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(y), reinterpret_cast<const float4*>(dy), reinterpret_cast<float4*>(dx),
        four_wide / 4, accumulate);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  if (count <= four_wide) return;
  relu_backward_kernel<<<blocks_for(count - four_wide), kThreads, 0, stream>>>(
      y + four_wide, dy + four_wide, dx + four_wide, count - four_wide, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void relu_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  // Whole bytes (eight elements, 32 bytes of x and y) by the float4 kernel
  // where x and y are 16-byte aligned, the rest (and all otherwise) by the scalar one.
  const int64_t wide_bytes = four_wide_part(count, {x, y}) / 8;
  if (wide_bytes > 0) {
    relu_mask8_kernel<<<blocks_for(wide_bytes), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), mask, wide_bytes);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  const int64_t done = 8 * wide_bytes;
  if (count <= done) return;
  relu_mask_kernel<<<blocks_for((count - done + 7) / 8), kThreads, 0, stream>>>(x + done, y + done,
                                                                               mask + wide_bytes, count - done);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void relu_backward_mask(const uint8_t* mask, const float* dy, float* dx, int64_t count, bool accumulate,
                        cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t wide_bytes = four_wide_part(count, {dy, dx}) / 8;
  if (wide_bytes > 0) {
    relu_backward_mask8_kernel<<<blocks_for(wide_bytes), kThreads, 0, stream>>>(
        mask, reinterpret_cast<const float4*>(dy), reinterpret_cast<float4*>(dx), wide_bytes, accumulate);
    MPLAN_CUDA_CHECK_LAUNCH();
  }
  const int64_t done = 8 * wide_bytes;
  if (count <= done) return;
  relu_backward_mask_kernel<<<blocks_for(count - done), kThreads, 0, stream>>>(mask + wide_bytes, dy + done,
                                                                              dx + done, count - done, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void broadcast_rows(const float* bias, float* y, int64_t n, int64_t out, cudaStream_t stream) {
  if (n * out <= 0) return;
  broadcast_rows_kernel<<<blocks_for(n * out), kThreads, 0, stream>>>(bias, y, n, out);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void sum_rows_into(const float* dy, float* dbias, int64_t n, int64_t out, cudaStream_t stream) {
  if (out <= 0) return;
  sum_rows_into_kernel<<<blocks_for(out), kThreads, 0, stream>>>(dy, dbias, n, out);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t stream) {
  if (planes <= 0) return;
  global_avg_pool_forward_kernel<<<blocks_for(planes), kThreads, 0, stream>>>(x, y, planes, hw);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw, bool accumulate,
                              cudaStream_t stream) {
  if (planes * hw <= 0) return;
  global_avg_pool_backward_kernel<<<blocks_for(planes * hw), kThreads, 0, stream>>>(dy, dx, planes, hw, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t sample_elements,
                     int64_t first_sample, float p, uint64_t seed, uint64_t step, cudaStream_t stream) {
  if (n * sample_elements <= 0) return;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // as runtime/cpu/dropout.cpp
  dropout_forward_kernel<<<blocks_for(n * sample_elements), kThreads, 0, stream>>>(
      x, y, mask, n, sample_elements, first_sample, p, scale, seed, step);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void dropout_backward(const uint8_t* mask, const float* dy, float* dx, int64_t count, float p, bool accumulate,
                      cudaStream_t stream) {
  if (count <= 0) return;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropout_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(mask, dy, dx, count, scale, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void concat_forward(const float* x, float* y, int64_t n, int64_t total_channels, int64_t channel_offset,
                    int64_t channels, int64_t hw, cudaStream_t stream) {
  if (n * channels * hw <= 0) return;
  concat_forward_kernel<<<blocks_for(n * channels * hw), kThreads, 0, stream>>>(x, y, n, total_channels,
                                                                               channel_offset, channels, hw);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void concat_backward(const float* dy, float* dx, int64_t n, int64_t total_channels, int64_t channel_offset,
                     int64_t channels, int64_t hw, bool accumulate, cudaStream_t stream) {
  if (n * channels * hw <= 0) return;
  concat_backward_kernel<<<blocks_for(n * channels * hw), kThreads, 0, stream>>>(
      dy, dx, n, total_channels, channel_offset, channels, hw, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void softmax_xent_loss(const float* logits, const int32_t* labels, float* loss, int64_t n, int64_t classes,
                       float label_smoothing, cudaStream_t stream) {
  softmax_xent_loss_kernel<<<1, kLossThreads, 0, stream>>>(logits, labels, loss, n, classes, label_smoothing);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void softmax_xent_metrics(const float* logits, const int32_t* labels, float* metrics, int64_t n, int64_t classes,
                          float label_smoothing, cudaStream_t stream) {
  softmax_xent_metrics_kernel<<<1, kLossThreads, 0, stream>>>(logits, labels, metrics, n, classes, label_smoothing);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void softmax_xent_grad(const float* probs, const int32_t* labels, float* dlogits, int64_t n, int64_t classes,
                       float scale, bool accumulate, float label_smoothing, cudaStream_t stream) {
  if (n * classes <= 0) return;
  softmax_xent_grad_kernel<<<blocks_for(n * classes), kThreads, 0, stream>>>(probs, labels, dlogits, n, classes,
                                                                            scale, accumulate, label_smoothing);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void adamw_step(float* w, float* g, float* exp_avg, float* exp_avg_sq, int64_t count, float lr, float beta1,
                float beta2, float eps, float weight_decay, uint64_t step, cudaStream_t stream) {
  if (count <= 0) return;
  // The scalars as runtime/cpu/adamw.cpp computes them.
  const double t = static_cast<double>(step + 1);
  const auto decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const auto correction2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(beta2), t)));
  const auto step_size = static_cast<float>(static_cast<double>(lr) / (1.0 - pow(static_cast<double>(beta1), t)));
  adamw_step_kernel<<<blocks_for(count), kThreads, 0, stream>>>(w, g, exp_avg, exp_avg_sq, count, decay, beta1, beta2,
                                                               1.0f - beta1, 1.0f - beta2, eps, correction2_sqrt,
                                                               step_size);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void sgd_step(float* w, float* g, float* momentum_buf, int64_t count, float lr, float momentum, float weight_decay,
              bool first_step, bool nesterov, cudaStream_t stream) {
  if (count <= 0) return;
  sgd_step_kernel<<<blocks_for(count), kThreads, 0, stream>>>(w, g, momentum_buf, count, lr, momentum, weight_decay,
                                                             first_step, nesterov);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
