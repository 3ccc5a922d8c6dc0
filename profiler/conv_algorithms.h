#pragma once
// cuDNN's convolution algorithms (legacy API, cuDNN 7/8) as the analytic cost
// model sees them: the names, cuDNN's support rules, a workspace formula that
// follows each algorithm, and the arithmetic and memory traffic it does.
//
// Names are cuDNN's, lower case: forward "implicit_gemm" is
// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; backward-data "algo_0" is
// CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; backward-filter "fft_tiling" is
// CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING. cudnn_algorithm_id gives the
// enum value the generated program passes to cuDNN.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/arch_efficiency.h"
#include "profiler/kernel_work.h"

namespace mplan {

// One convolution layer, per sample: input [C, H, W], filter [K, C/groups, R, S],
// output [K, P, Q].
struct ConvShape {
  int64_t C = 1, H = 1, W = 1;
  int64_t K = 1, R = 1, S = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t groups = 1;
  int64_t P = 1, Q = 1;
  bool bias = false;
  int64_t dilation_h = 1, dilation_w = 1;  // taps dilation apart (P and Q count it)
};

// A 1x1 filter at stride 1 without padding, ungrouped: the unfolded input is
// the input itself (arch_efficiency.h, pointwise; the factors were fitted on
// ungrouped layers only).
bool conv_is_pointwise(const ConvShape& s);

// Fills P and Q from the rest (floor division, as cuDNN and PyTorch).
ConvShape make_conv_shape(int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                          int64_t stride, int64_t pad, int64_t groups = 1, bool bias = false);

// cuDNN's three convolution operations (ConvDirection, profiler/arch_efficiency.h)
// are TDFG FP, BP1 and BP2 of a conv layer.

// Every algorithm cuDNN names for a direction, in cuDNN's enum order.
const std::vector<std::string>& conv_algorithm_names(ConvDirection direction);
// cuDNN's enum value of an algorithm; -1 for a name cuDNN does not have.
int cudnn_algorithm_id(ConvDirection direction, std::string_view name);

// Why cuDNN refuses an algorithm for a shape ("winograd needs a 3x3 filter,
// got 5x5"), or nothing when cuDNN supports it (cuDNN 7 API reference, the
// per-algorithm tables of cudnnConvolutionForward / BackwardData /
// BackwardFilter, FP32 data, NCHW; a dilated filter only by the GEMM family
// and algo_0/algo_1, the cuDNN 7 table's "dilation > 1" rows).
std::optional<std::string> conv_unsupported_reason(ConvDirection direction, std::string_view algorithm,
                                                   const ConvShape& shape);
inline bool conv_supported(ConvDirection direction, std::string_view algorithm, const ConvShape& shape) {
  return !conv_unsupported_reason(direction, algorithm, shape).has_value();
}

// Workspace of a supported algorithm at sub-batch b, in bytes (FP32):
//   implicit_gemm, algo_0: none;
//   gemm (and backward-filter algo_3): the im2col buffer, C*R*S*P*Q*b*4;
//   fft: half spectra (n_h x (n_w/2+1) complex64) of every input, filter and
//     output plane, at the padded image size rounded up to 2^a 3^b 5^c 7^d;
//   fft_tiling: the same for 32x32 tiles;
//   winograd (fused F(2x2,3x3)): the transformed filters, K*C/g*4*4*4;
//   winograd_nonfused (F(4x4,3x3) or F(2x2,5x5), 6x6 tiles): transformed
//     input, filter and output tiles.
int64_t conv_workspace_bytes(ConvDirection direction, std::string_view algorithm, const ConvShape& shape,
                             int64_t sub_batch);

// The kernels an algorithm runs at sub-batch b (a phase each): arithmetic,
// memory traffic, parallel work, and which efficiency of the device's
// architecture table the arithmetic runs at (KernelClass, family, direction).
// The algorithm's first kernel pays the architecture's cuDNN call overhead,
// each further one its kernel overhead (KernelWork::cudnn). The bias add
// (forward) and bias gradient (backward-filter) are included when the layer
// has a bias. A grouped layer runs as cuDNN 9 runs it: a transform algorithm
// (FFT, FFT tiling, Winograd) one group after another (KernelWork::repeats),
// a GEMM algorithm as the implicit GEMM's one grouped kernel.
std::vector<KernelWork> conv_work(ConvDirection direction, std::string_view algorithm, const ConvShape& shape,
                                  int64_t sub_batch);

// FLOPs of the direct method (2 per multiply-add), the same in every direction.
double conv_direct_flops(const ConvShape& shape, int64_t sub_batch);

// Smallest 2^a 3^b 5^c 7^d >= n: the sizes cuFFT transforms fastest.
int64_t fft_friendly_size(int64_t n);

}  // namespace mplan
