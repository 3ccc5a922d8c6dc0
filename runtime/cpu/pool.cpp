// Max and average pooling with PyTorch's semantics (aten/src/ATen/native/Pool.h:
// pooling_output_shape; AvgPool2d with count_include_pad=True), and global
// average pooling.
//
// The forward passes and the average backward pass work a row at a time: for each
// window row and column offset, one loop over the output row (contiguous at stride
// 1, so it vectorises), instead of one window walk per output element.

#include <algorithm>
#include <limits>

#include "runtime/cpu/conv_window.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/vector_ops.h"
#include "runtime/cpu/vectorize.h"
#include "runtime/cpu/op_profile.h"

namespace mplan::rt::cpu {

namespace {

// The window of output position o along one axis: [lo, hi) inside the input, and
// its extent clipped to the padded input (PyTorch's count_include_pad divisor).
struct AxisWindow {
  int64_t lo, hi, padded_extent;
};

AxisWindow axis_window(int64_t o, int64_t kernel, int64_t stride, int64_t pad, int64_t in) {
  const int64_t start = o * stride - pad;
  const int64_t end = std::min(start + kernel, in + pad);
  return {std::max<int64_t>(start, 0), std::min(start + kernel, in), end - start};
}

// y[q] = max(y[q], x[q*stride]) over q in [lo, hi).
MPLAN_VECTOR_CLONES void max_into(float* __restrict y, const float* __restrict x, int64_t lo, int64_t hi,
                                  int64_t stride) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) y[q] = x[q] > y[q] ? x[q] : y[q];
  } else {
    for (int64_t q = lo; q < hi; ++q) y[q] = x[q * stride] > y[q] ? x[q * stride] : y[q];
  }
}

// y[q] += x[q*stride] over q in [lo, hi).
MPLAN_VECTOR_CLONES void sum_into(float* __restrict y, const float* __restrict x, int64_t lo, int64_t hi,
                                  int64_t stride) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) y[q] += x[q];
  } else {
    for (int64_t q = lo; q < hi; ++q) y[q] += x[q * stride];
  }
}

// x[q*stride] += g[q] over q in [lo, hi).
MPLAN_VECTOR_CLONES void spread_into(float* __restrict x, const float* __restrict g, int64_t lo, int64_t hi,
                                     int64_t stride) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) x[q] += g[q];
  } else {
    for (int64_t q = lo; q < hi; ++q) x[q * stride] += g[q];
  }
}

// Forward of one output row: combine(y_row, input row, ...) over the window.
template <class Combine>
void pool_row(const PoolShape& sh, const float* plane, float* yrow, int64_t p, Combine&& combine) {
  const int64_t Q = sh.q();
  const AxisWindow rows = axis_window(p, sh.kernel_h, sh.stride_h, sh.pad_h, sh.h);
  for (int64_t i = rows.lo; i < rows.hi; ++i) {
    const float* xrow = plane + i * sh.w;
    for (int64_t s = 0; s < sh.kernel_w; ++s) {
      const cpu::OutputRange qs = cpu::valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
      if (qs.hi > qs.lo) combine(yrow, xrow - sh.pad_w + s, qs.lo, qs.hi, sh.stride_w);
    }
  }
}

// The common 2x2 window at stride 2 without padding (VGG's, DenseNet's transitions):
// every window whole inside the input.
bool window_2x2(const PoolShape& sh) {
  return sh.kernel_h == 2 && sh.kernel_w == 2 && sh.stride_h == 2 && sh.stride_w == 2 && sh.pad_h == 0 &&
         sh.pad_w == 0 && sh.p() * 2 <= sh.h && sh.q() * 2 <= sh.w;
}

// One output row of a 2x2 max pool from input rows a and b (the first maximum in
// window order a[2q], a[2q+1], b[2q], b[2q+1], NaN never chosen, as the generic path).
MPLAN_VECTOR_CLONES void max_row_2x2(const float* __restrict a, const float* __restrict b, float* __restrict y,
                                     int64_t Q) {
  for (int64_t q = 0; q < Q; ++q) {
    float m = -std::numeric_limits<float>::infinity();
    m = a[2 * q] > m ? a[2 * q] : m;
    m = a[2 * q + 1] > m ? a[2 * q + 1] : m;
    m = b[2 * q] > m ? b[2 * q] : m;
    m = b[2 * q + 1] > m ? b[2 * q + 1] : m;
    y[q] = m;
  }
}

// dx rows da, db (+)= dy routed to the first element of each window equal to y.
MPLAN_VECTOR_CLONES void max_row_2x2_backward(const float* __restrict a, const float* __restrict b,
                                              const float* __restrict y, const float* __restrict dy,
                                              float* __restrict da, float* __restrict db, int64_t Q) {
  for (int64_t q = 0; q < Q; ++q) {
    const bool first = a[2 * q] == y[q];
    const bool second = !first && a[2 * q + 1] == y[q];
    const bool third = !first && !second && b[2 * q] == y[q];
    const bool fourth = !first && !second && !third && b[2 * q + 1] == y[q];
    da[2 * q] += first ? dy[q] : 0.0f;
    da[2 * q + 1] += second ? dy[q] : 0.0f;
    db[2 * q] += third ? dy[q] : 0.0f;
    db[2 * q + 1] += fourth ? dy[q] : 0.0f;
  }
}

// dx rows da, db (+)= dy / 4 over each window.
MPLAN_VECTOR_CLONES void avg_row_2x2_backward(const float* __restrict dy, float* __restrict da, float* __restrict db,
                                              int64_t Q) {
  for (int64_t q = 0; q < Q; ++q) {
    const float g = dy[q] / 4.0f;
    da[2 * q] += g;
    da[2 * q + 1] += g;
    db[2 * q] += g;
    db[2 * q + 1] += g;
  }
}

MPLAN_VECTOR_CLONES void avg_row_2x2(const float* __restrict a, const float* __restrict b, float* __restrict y,
                                     int64_t Q) {
  for (int64_t q = 0; q < Q; ++q) y[q] = (a[2 * q] + a[2 * q + 1] + b[2 * q] + b[2 * q + 1]) / 4.0f;
}

}  // namespace

void max_pool_forward(const PoolShape& sh, const float* x, float* y) {
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  if (window_2x2(sh)) {
    for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
      for (int64_t p = 0; p < P; ++p) {
        const float* a = x + (plane * sh.h + 2 * p) * sh.w;
        max_row_2x2(a, a + sh.w, y + (plane * P + p) * Q, Q);
      }
    return;
  }
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    for (int64_t p = 0; p < P; ++p) {
      float* yrow = y + (plane * P + p) * Q;
      std::fill(yrow, yrow + Q, -std::numeric_limits<float>::infinity());
      pool_row(sh, x + plane * sh.h * sh.w, yrow, p, max_into);
    }
  }
}

void max_pool_backward(const PoolShape& sh, const float* x, const float* y, const float* dy,
                       float* dx, bool accumulate) {
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  if (!accumulate) fill_f32(dx, sh.n * sh.c * sh.h * sh.w, 0.0f);
  if (window_2x2(sh)) {
    for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t row = (plane * sh.h + 2 * p) * sh.w, out = (plane * P + p) * Q;
        max_row_2x2_backward(x + row, x + row + sh.w, y + out, dy + out, dx + row, dx + row + sh.w, Q);
      }
    return;
  }
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    const float* xp = x + plane * sh.h * sh.w;
    float* dxp = dx + plane * sh.h * sh.w;
    const float* yp = y + plane * P * Q;
    const float* dyp = dy + plane * P * Q;
    for (int64_t p = 0; p < P; ++p) {
      const AxisWindow rows = axis_window(p, sh.kernel_h, sh.stride_h, sh.pad_h, sh.h);
      for (int64_t q = 0; q < Q; ++q) {
        const AxisWindow cols = axis_window(q, sh.kernel_w, sh.stride_w, sh.pad_w, sh.w);
        // The first maximum in window order, as PyTorch's CPU kernel picks it.
        const float best = yp[p * Q + q];
        for (int64_t i = rows.lo; i < rows.hi; ++i) {
          const float* xrow = xp + i * sh.w;
          int64_t j = cols.lo;
          while (j < cols.hi && xrow[j] != best) ++j;
          if (j < cols.hi) {
            dxp[i * sh.w + j] += dyp[p * Q + q];
            break;
          }
        }
      }
    }
  }
}

void max_pool_forward_indices(const PoolShape& sh, const float* x, float* y, uint8_t* index) {
  max_pool_forward(sh, x, y);
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    const float* xp = x + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p) {
      const AxisWindow rows = axis_window(p, sh.kernel_h, sh.stride_h, sh.pad_h, sh.h);
      const int64_t row0 = p * sh.stride_h - sh.pad_h;
      for (int64_t q = 0; q < Q; ++q) {
        const AxisWindow cols = axis_window(q, sh.kernel_w, sh.stride_w, sh.pad_w, sh.w);
        const int64_t col0 = q * sh.stride_w - sh.pad_w;
        // max_pool_backward's choice: the first element equal to y in window order.
        const float best = y[(plane * P + p) * Q + q];
        uint8_t place = kNoPoolIndex;
        for (int64_t i = rows.lo; i < rows.hi && place == kNoPoolIndex; ++i)
          for (int64_t j = cols.lo; j < cols.hi; ++j)
            if (xp[i * sh.w + j] == best) {
              place = static_cast<uint8_t>((i - row0) * sh.kernel_w + (j - col0));
              break;
            }
        index[(plane * P + p) * Q + q] = place;
      }
    }
  }
}

// max_pool_backward's sums in its order (output by output), from the places.
void max_pool_backward_indices(const PoolShape& sh, const uint8_t* index, const float* dy, float* dx,
                               bool accumulate) {
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  if (!accumulate) fill_f32(dx, sh.n * sh.c * sh.h * sh.w, 0.0f);
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    float* dxp = dx + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t at = (plane * P + p) * Q + q;
        // A place outside the window or the image (kNoPoolIndex, or indices
        // that no forward pass wrote: the profiler's) sends nothing, as in
        // the CUDA kernel, which gathers from the places inside.
        if (index[at] >= sh.kernel_h * sh.kernel_w) continue;
        const int64_t i = p * sh.stride_h - sh.pad_h + index[at] / sh.kernel_w;
        const int64_t j = q * sh.stride_w - sh.pad_w + index[at] % sh.kernel_w;
        if (i < 0 || i >= sh.h || j < 0 || j >= sh.w) continue;
        dxp[i * sh.w + j] += dy[at];
      }
  }
}

void avg_pool_forward(const PoolShape& sh, const float* x, float* y) {
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  if (window_2x2(sh)) {
    for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
      for (int64_t p = 0; p < P; ++p) {
        const float* a = x + (plane * sh.h + 2 * p) * sh.w;
        avg_row_2x2(a, a + sh.w, y + (plane * P + p) * Q, Q);
      }
    return;
  }
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    for (int64_t p = 0; p < P; ++p) {
      float* yrow = y + (plane * P + p) * Q;
      std::fill(yrow, yrow + Q, 0.0f);
      pool_row(sh, x + plane * sh.h * sh.w, yrow, p, sum_into);
      const int64_t row_extent = axis_window(p, sh.kernel_h, sh.stride_h, sh.pad_h, sh.h).padded_extent;
      for (int64_t q = 0; q < Q; ++q)
        yrow[q] /= static_cast<float>(
            row_extent * axis_window(q, sh.kernel_w, sh.stride_w, sh.pad_w, sh.w).padded_extent);
    }
  }
}

void avg_pool_backward(const PoolShape& sh, const float* dy, float* dx, bool accumulate) {
  OpTimer timer(OpKind::pool);
  const int64_t P = sh.p(), Q = sh.q();
  if (!accumulate) fill_f32(dx, sh.n * sh.c * sh.h * sh.w, 0.0f);
  if (window_2x2(sh)) {
    for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
      for (int64_t p = 0; p < P; ++p) {
        float* da = dx + (plane * sh.h + 2 * p) * sh.w;
        avg_row_2x2_backward(dy + (plane * P + p) * Q, da, da + sh.w, Q);
      }
    return;
  }
  constexpr int64_t kBlock = 256;  // output columns per pass (the gradient row on the stack)
  float g[kBlock];
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane) {
    float* dxp = dx + plane * sh.h * sh.w;
    for (int64_t p = 0; p < P; ++p) {
      const AxisWindow rows = axis_window(p, sh.kernel_h, sh.stride_h, sh.pad_h, sh.h);
      const float* dyrow = dy + (plane * P + p) * Q;
      for (int64_t q0 = 0; q0 < Q; q0 += kBlock) {
        const int64_t q1 = std::min(Q, q0 + kBlock);
        for (int64_t q = q0; q < q1; ++q)
          g[q - q0] = dyrow[q] / static_cast<float>(rows.padded_extent *
                                                    axis_window(q, sh.kernel_w, sh.stride_w, sh.pad_w, sh.w).padded_extent);
        for (int64_t i = rows.lo; i < rows.hi; ++i)
          for (int64_t s = 0; s < sh.kernel_w; ++s) {
            const cpu::OutputRange qs = cpu::valid_outputs(s, sh.w, sh.stride_w, sh.pad_w, Q);
            const int64_t lo = std::max(qs.lo, q0), hi = std::min(qs.hi, q1);
            // dx[i, q*stride - pad + s] += g[q]
            if (hi > lo)
              spread_into(dxp + i * sh.w - sh.pad_w + s + q0 * sh.stride_w, g, lo - q0, hi - q0, sh.stride_w);
          }
      }
    }
  }
}

void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  OpTimer timer(OpKind::pool);
  for (int64_t plane = 0; plane < n * c; ++plane) {
    y[plane] = static_cast<float>(cpu::sum_f32(x + plane * hw, hw) / hw);
  }
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t c, int64_t hw,
                              bool accumulate) {
  OpTimer timer(OpKind::pool);
  for (int64_t plane = 0; plane < n * c; ++plane)
    cpu::set_or_add_scalar(dx + plane * hw, hw, dy[plane] / static_cast<float>(hw), accumulate);
}

}  // namespace mplan::rt::cpu
