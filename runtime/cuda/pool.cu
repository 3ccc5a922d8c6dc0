// Max and average pooling with PyTorch's semantics, as runtime/cpu/pool.cpp,
// in the backend's own kernels rather than cuDNN's pooling:
//   - ceil_mode: PyTorch's last window may hang over the right padding and its
//     avg-pool divisor is the window clipped to the padded input
//     (count_include_pad=True); cuDNN's pooling descriptor has one symmetric
//     padding and divides CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING by the
//     whole window, so it cannot express those windows.
//   - max-pool backward: PyTorch routes each dy to the first maximum of its
//     window (the first in row-major order). cuDNN documents
//     CUDNN_POOLING_MAX_DETERMINISTIC only as deterministic, not which of tied
//     maxima it picks, and ties are common after a ReLU (windows of zeros).
// Backward gathers (one thread per input element sums what the windows over
// it send), so it needs no atomics and adds in the CPU's window order.

#include <cmath>
#include <cstdint>

#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// The geometry of a PoolShape with its output size, passed by value.
struct PoolGeometry {
  int64_t planes, h, w, p, q;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

PoolGeometry geometry_of(const PoolShape& s) {
  return PoolGeometry{s.n * s.c, s.h, s.w, s.p(), s.q(), s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h,
                      s.pad_w};
}

// runtime/cpu/pool.cpp window_at: the window clipped to the input, and the
// divisor: the window clipped to the padded input.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

__device__ Window window_at(const PoolGeometry& g, int64_t p, int64_t q) {
  const int64_t h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
  const int64_t h1 = min64(h0 + g.kernel_h, g.h + g.pad_h), w1 = min64(w0 + g.kernel_w, g.w + g.pad_w);
  Window win;
  win.divisor = (h1 - h0) * (w1 - w0);
  win.h0 = max64(h0, 0);
  win.w0 = max64(w0, 0);
  win.h1 = min64(h1, g.h);
  win.w1 = min64(w1, g.w);
  return win;
}

// The outputs whose windows hold input row i: p * stride - pad <= i < p * stride - pad + kernel.
__device__ void covering(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t outputs, int64_t* first,
                         int64_t* last) {
  const int64_t low = i + pad - kernel + 1;  // p * stride >= low
  *first = low <= 0 ? 0 : (low + stride - 1) / stride;
  *last = min64((i + pad) / stride, outputs - 1);
}

__global__ void max_pool_forward_kernel(PoolGeometry g, const float* x, float* y) {
  MPLAN_FOR_EACH(at, g.planes * g.p * g.q) {
    const int64_t plane = at / (g.p * g.q), p = (at / g.q) % g.p, q = at % g.q;
    const float* xp = x + plane * g.h * g.w;
    const Window win = window_at(g, p, q);
    float best = -INFINITY;
    for (int64_t i = win.h0; i < win.h1; ++i)
      for (int64_t j = win.w0; j < win.w1; ++j)
        if (xp[i * g.w + j] > best) best = xp[i * g.w + j];
    y[at] = best;
  }
}

// dx[i, j] = sum of dy over the windows whose first element equal to their y
// is (i, j) (runtime/cpu/pool.cpp max_pool_backward). A window whose maximum
// is not x[i, j] sends nothing here, so the window is scanned (for an equal
// element before (i, j)) only when x[i, j] is its maximum: the first kernel
// scanned every covering window whole, 36 loads per input of a 3x3/2 pool,
// and took 2.2-3.2 ms for AlexNet's pools at sub-batch 200 on the H100
// (docs/gpu-validation.md). Index is int32_t where the tensor's elements fit,
// as 64-bit division is many instructions on a GPU.
template <typename Index>
__global__ void max_pool_backward_kernel(PoolGeometry geometry, const float* x, const float* y, const float* dy,
                                         float* dx, bool accumulate) {
  const Index h = static_cast<Index>(geometry.h), w = static_cast<Index>(geometry.w);
  const Index p_count = static_cast<Index>(geometry.p), q_count = static_cast<Index>(geometry.q);
  const Index count = static_cast<Index>(geometry.planes) * h * w;
  for (Index at = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; at < count;
       at += static_cast<Index>(blockDim.x) * gridDim.x) {
    const Index plane = at / (h * w), ij = at - plane * (h * w), i = ij / w, j = ij - i * w;
    const float* xp = x + static_cast<int64_t>(plane) * h * w;
    const float* yp = y + static_cast<int64_t>(plane) * p_count * q_count;
    const float* dyp = dy + static_cast<int64_t>(plane) * p_count * q_count;
    const float v = xp[ij];
    int64_t p0, p1, q0, q1;
    covering(i, geometry.kernel_h, geometry.stride_h, geometry.pad_h, geometry.p, &p0, &p1);
    covering(j, geometry.kernel_w, geometry.stride_w, geometry.pad_w, geometry.q, &q0, &q1);
    float sum = 0.0f;
    for (Index p = static_cast<Index>(p0); p <= static_cast<Index>(p1); ++p)
      for (Index q = static_cast<Index>(q0); q <= static_cast<Index>(q1); ++q) {
        const float best = yp[p * q_count + q];
        if (!(v == best)) continue;  // not this window's maximum (NaN never is)
        // Ours unless an element before (i, j) in the CPU's scan order equals best.
        const Window win = window_at(geometry, p, q);
        bool first = true;
        for (Index a = static_cast<Index>(win.h0); a <= i && first; ++a) {
          const Index end = a < i ? static_cast<Index>(win.w1) : j;
          for (Index b = static_cast<Index>(win.w0); b < end; ++b)
            if (xp[a * w + b] == best) {
              first = false;
              break;
            }
        }
        if (first) sum = __fadd_rn(sum, dyp[p * q_count + q]);
      }
    dx[at] = accumulate ? __fadd_rn(dx[at], sum) : sum;
  }
}

// The compact form (docs/planner.md, "Memory-saving variants"): y as
// max_pool_forward_kernel, and index[at] = the place, in the unclipped window
// (origin p * stride_h - pad_h, q * stride_w - pad_w), of the first element in
// the scan order equal to y, or kNoIndex where none is (a window of NaN).
// With `>`, the last update of best is at the first element equal to the
// final best (an equal element before it would have made best at least as
// large, and `>` would not have fired); the one final best no update reaches
// is -INFINITY itself, so the first element equal to it is taken while
// nothing is (best keeps its bits: -INFINITY for -INFINITY).
constexpr unsigned kNoIndex = kNoPoolIndex;  // runtime/types.h

__global__ void max_pool_forward_indices_kernel(PoolGeometry g, const float* x, float* y, uint8_t* index) {
  MPLAN_FOR_EACH(at, g.planes * g.p * g.q) {
    const int64_t plane = at / (g.p * g.q), p = (at / g.q) % g.p, q = at % g.q;
    const float* xp = x + plane * g.h * g.w;
    const Window win = window_at(g, p, q);
    const int64_t h0u = p * g.stride_h - g.pad_h, w0u = q * g.stride_w - g.pad_w;
    float best = -INFINITY;
    unsigned place = kNoIndex;
    for (int64_t i = win.h0; i < win.h1; ++i)
      for (int64_t j = win.w0; j < win.w1; ++j) {
        const float v = xp[i * g.w + j];
        if (v > best || (place == kNoIndex && v == best)) {
          best = v;
          place = static_cast<unsigned>((i - h0u) * g.kernel_w + (j - w0u));
        }
      }
    y[at] = best;
    index[at] = static_cast<uint8_t>(place);
  }
}

// max_pool_backward_kernel with the windows' choices read from index: dx[i, j]
// sums, in the same window order, dy of the covering windows whose chosen
// place is (i, j), i.e. (i - h0u) * kernel_w + (j - w0u) (covering windows
// hold (i, j), so that place is in [0, kernel_h * kernel_w) and never
// kNoIndex). Index as there.
template <typename Index>
__global__ void max_pool_backward_indices_kernel(PoolGeometry geometry, const uint8_t* index, const float* dy,
                                                 float* dx, bool accumulate) {
  const Index h = static_cast<Index>(geometry.h), w = static_cast<Index>(geometry.w);
  const Index p_count = static_cast<Index>(geometry.p), q_count = static_cast<Index>(geometry.q);
  const Index kernel_w = static_cast<Index>(geometry.kernel_w);
  const Index stride_h = static_cast<Index>(geometry.stride_h), stride_w = static_cast<Index>(geometry.stride_w);
  const Index pad_h = static_cast<Index>(geometry.pad_h), pad_w = static_cast<Index>(geometry.pad_w);
  const Index count = static_cast<Index>(geometry.planes) * h * w;
  for (Index at = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; at < count;
       at += static_cast<Index>(blockDim.x) * gridDim.x) {
    const Index plane = at / (h * w), ij = at - plane * (h * w), i = ij / w, j = ij - i * w;
    const uint8_t* indexp = index + static_cast<int64_t>(plane) * p_count * q_count;
    const float* dyp = dy + static_cast<int64_t>(plane) * p_count * q_count;
    int64_t p0, p1, q0, q1;
    covering(i, geometry.kernel_h, geometry.stride_h, geometry.pad_h, geometry.p, &p0, &p1);
    covering(j, geometry.kernel_w, geometry.stride_w, geometry.pad_w, geometry.q, &q0, &q1);
    float sum = 0.0f;
    for (Index p = static_cast<Index>(p0); p <= static_cast<Index>(p1); ++p) {
      const Index row = (i - (p * stride_h - pad_h)) * kernel_w;
      for (Index q = static_cast<Index>(q0); q <= static_cast<Index>(q1); ++q) {
        const unsigned chosen = indexp[p * q_count + q];
        if (chosen == kNoIndex) continue;  // no element equals this window's y: it sends nothing
        if (static_cast<Index>(chosen) != row + (j - (q * stride_w - pad_w))) continue;
        sum = __fadd_rn(sum, dyp[p * q_count + q]);
      }
    }
    dx[at] = accumulate ? __fadd_rn(dx[at], sum) : sum;
  }
}

__global__ void avg_pool_forward_kernel(PoolGeometry g, const float* x, float* y) {
  MPLAN_FOR_EACH(at, g.planes * g.p * g.q) {
    const int64_t plane = at / (g.p * g.q), p = (at / g.q) % g.p, q = at % g.q;
    const float* xp = x + plane * g.h * g.w;
    const Window win = window_at(g, p, q);
    double sum = 0.0;
    for (int64_t i = win.h0; i < win.h1; ++i)
      for (int64_t j = win.w0; j < win.w1; ++j) sum += xp[i * g.w + j];
    y[at] = static_cast<float>(sum / win.divisor);
  }
}

__global__ void avg_pool_backward_kernel(PoolGeometry g, const float* dy, float* dx, bool accumulate) {
  MPLAN_FOR_EACH(at, g.planes * g.h * g.w) {
    const int64_t plane = at / (g.h * g.w), i = (at / g.w) % g.h, j = at % g.w;
    const float* dyp = dy + plane * g.p * g.q;
    int64_t p0, p1, q0, q1;
    covering(i, g.kernel_h, g.stride_h, g.pad_h, g.p, &p0, &p1);
    covering(j, g.kernel_w, g.stride_w, g.pad_w, g.q, &q0, &q1);
    float sum = 0.0f;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        const Window win = window_at(g, p, q);
        if (i < win.h0 || i >= win.h1 || j < win.w0 || j >= win.w1) continue;
        sum = __fadd_rn(sum, dyp[p * g.q + q] / static_cast<float>(win.divisor));
      }
    dx[at] = accumulate ? __fadd_rn(dx[at], sum) : sum;
  }
}

}  // namespace

void max_pool_forward(const PoolShape& shape, const float* x, float* y, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.p * g.q <= 0) return;
  max_pool_forward_kernel<<<blocks_for(g.planes * g.p * g.q), kThreads, 0, stream>>>(g, x, y);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void max_pool_backward(const PoolShape& shape, const float* x, const float* y, const float* dy, float* dx,
                       bool accumulate, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.h * g.w <= 0) return;
  // The grid-stride index goes up to count + the grid's threads, which must fit too.
  if (g.planes * g.h * g.w <= INT32_MAX - static_cast<int64_t>(kThreads) * kMaxBlocks)
    max_pool_backward_kernel<int32_t>
        <<<blocks_for(g.planes * g.h * g.w), kThreads, 0, stream>>>(g, x, y, dy, dx, accumulate);
  else
    max_pool_backward_kernel<int64_t>
        <<<blocks_for(g.planes * g.h * g.w), kThreads, 0, stream>>>(g, x, y, dy, dx, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void max_pool_forward_indices(const PoolShape& shape, const float* x, float* y, uint8_t* index,
                              cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.p * g.q <= 0) return;
  max_pool_forward_indices_kernel<<<blocks_for(g.planes * g.p * g.q), kThreads, 0, stream>>>(g, x, y, index);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void max_pool_backward_indices(const PoolShape& shape, const uint8_t* index, const float* dy, float* dx,
                               bool accumulate, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.h * g.w <= 0) return;
  // As max_pool_backward: int32_t where count + the grid's threads fit.
  if (g.planes * g.h * g.w <= INT32_MAX - static_cast<int64_t>(kThreads) * kMaxBlocks)
    max_pool_backward_indices_kernel<int32_t>
        <<<blocks_for(g.planes * g.h * g.w), kThreads, 0, stream>>>(g, index, dy, dx, accumulate);
  else
    max_pool_backward_indices_kernel<int64_t>
        <<<blocks_for(g.planes * g.h * g.w), kThreads, 0, stream>>>(g, index, dy, dx, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void avg_pool_forward(const PoolShape& shape, const float* x, float* y, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.p * g.q <= 0) return;
  avg_pool_forward_kernel<<<blocks_for(g.planes * g.p * g.q), kThreads, 0, stream>>>(g, x, y);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void avg_pool_backward(const PoolShape& shape, const float* dy, float* dx, bool accumulate, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(shape);
  if (g.planes * g.h * g.w <= 0) return;
  avg_pool_backward_kernel<<<blocks_for(g.planes * g.h * g.w), kThreads, 0, stream>>>(g, dy, dx, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
