#pragma once
// Plain types shared by every backend of the runtime and by the code that
// describes runtime calls (the op table, codegen, the profilers). No
// dependencies: the runtime depends on nothing else in mplan.
//
// Layouts are NCHW float32 throughout, as in PyTorch and cuDNN's default.

#include <cstdint>

namespace mplan::rt {

// A convolution of n images (the sub-batch or micro-batch of one call):
//
//   x  (n, c, h, w)          input
//   w  (k, c/groups, r, s)   filter (PyTorch layout)
//   y  (n, k, p, q)          output, p = (h + 2*pad_h - dilation_h*(r-1) - 1) / stride_h + 1
//
// dilation spreads the filter taps dilation apart (PyTorch's dilation; 1: none).
struct ConvShape {
  int64_t n = 1;                // images in this call
  int64_t c = 1, h = 1, w = 1;  // input channels and size
  int64_t k = 1, r = 1, s = 1;  // output channels, filter height and width
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t groups = 1;
  int64_t dilation_h = 1, dilation_w = 1;

  // The filter's extent on the input: (r - 1) * dilation + 1.
  int64_t extent_h() const { return (r - 1) * dilation_h + 1; }
  int64_t extent_w() const { return (s - 1) * dilation_w + 1; }
  int64_t p() const { return (h + 2 * pad_h - extent_h()) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - extent_w()) / stride_w + 1; }
  int64_t x_elements() const { return n * c * h * w; }
  int64_t y_elements() const { return n * k * p() * q(); }
  int64_t w_elements() const { return k * (c / groups) * r * s; }
  // Whether the fields describe a convolution (positive sizes, channels divisible
  // by groups, dilated filter no larger than the padded input).
  bool valid() const {
    if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1 || r < 1 || s < 1) return false;
    if (stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0 || groups < 1) return false;
    if (dilation_h < 1 || dilation_w < 1 || dilation_h > (int64_t{1} << 30) || dilation_w > (int64_t{1} << 30)) return false;
    if (c % groups != 0 || k % groups != 0) return false;
    return h + 2 * pad_h >= extent_h() && w + 2 * pad_w >= extent_w();
  }
};

// cuDNN's three convolution operations: the TDFG's FP, BP1 and BP2 of a conv layer.
enum class ConvDirection : int32_t { forward = 0, backward_data = 1, backward_filter = 2 };

// A convolution algorithm of the backend the program is built for: on the CPU
// backend an index into its own algorithms (runtime/cpu/conv_kernels.h), on
// the CUDA backend cuDNN's enum value for the direction
// (cudnnConvolutionFwdAlgo_t, ...BwdDataAlgo_t, ...BwdFilterAlgo_t).
using ConvAlgoId = int32_t;

// One micro-batch of a micro-batched convolution: n images by algo
// (mu-cuDNN §III-A: a configuration is a list of micro-configurations).
struct ConvMicroBatch {
  int64_t n = 0;
  ConvAlgoId algo = 0;
};

// A list of micro-batches. Backends read it when the call is enqueued, so it
// need only live until the enqueuing function returns.
struct MicroBatches {
  const ConvMicroBatch* items = nullptr;
  int32_t count = 0;
};

// Max or average pooling of n images, PyTorch semantics (pad, ceil_mode; avg
// pooling with count_include_pad=True, PyTorch's default).
struct PoolShape {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  int64_t p() const;  // output height
  int64_t q() const;  // output width
};

// PyTorch's pooling_output_shape: floor or ceil of (in + 2*pad - kernel)/stride + 1,
// less one if ceil mode would start the last window inside the right padding.
inline int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}
inline int64_t PoolShape::p() const { return pool_output_size(h, kernel_h, stride_h, pad_h, ceil_mode); }
inline int64_t PoolShape::q() const { return pool_output_size(w, kernel_w, stride_w, pad_w, ceil_mode); }

// The compact max pool (max_pool_forward_indices): a byte per output gives
// the place in its window, so windows have at most kMaxIndexedPoolWindow
// elements, and kNoPoolIndex marks a window with no element equal to its y.
inline constexpr int64_t kMaxIndexedPoolWindow = 255;
inline constexpr uint8_t kNoPoolIndex = 255;

}  // namespace mplan::rt
