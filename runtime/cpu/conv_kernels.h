#pragma once
// Convolution on the CPU backend: NCHW float32, groups, stride, zero padding.
//
//   x  (n, c, h, w)          input
//   w  (k, c/groups, r, s)   filter (PyTorch layout)
//   y  (n, k, p, q)          output, p = (h + 2*pad_h - r) / stride_h + 1
//
// Five algorithms, each for some of the three directions, each with its own
// workspace, so the planner's algorithm choice (moDNN Eq. 5) and micro-batching
// (mu-cuDNN §III) change real time and real memory:
//
//   name                forward  backward-data  backward-filter  workspace              cuDNN analogue
//   "direct"            yes      yes            yes              none                   *_ALGO_0 / IMPLICIT_GEMM (no workspace)
//   "gemm"              yes      yes            yes              im2col columns         FWD_ALGO_GEMM, BWD_DATA_ALGO_1, BWD_FILTER_ALGO_1/3
//   "winograd"          yes      yes            no               transformed tiles      FWD/BWD_DATA_ALGO_WINOGRAD_NONFUSED
//   "tiled_gemm"        yes      yes            yes              packed tiles, <= 1.1 MiB  FWD_ALGO_IMPLICIT_PRECOMP_GEMM
//   "tiled_gemm_small"  yes      yes            yes              packed tiles, <= 44 KiB
//
// "gemm" lowers the batch with im2col (one group at a time, all images of the
// (micro-)batch at once) and multiplies with OpenBLAS: workspace =
// n * (c/groups)*r*s * p*q floats. "winograd" is F(2x2, 3x3) (Lavin & Gray) for
// 3x3 filters at stride 1; its workspace is the transformed filter, input tiles
// and output tiles (16 floats per tile and channel). Backward-data by Winograd is
// the forward Winograd of the 180°-rotated, channel-transposed filter over dy
// padded by r-1-pad (so pad <= 2). Backward-filter has no Winograd.
// "tiled_gemm" runs each direction as one blocked GEMM per group over the whole
// batch, its operands packed tile by tile straight from the tensors (runtime/cpu/
// conv_tiled_gemm.cpp): no column matrix, so its workspace is a few packed tiles
// and does not grow with the batch (the CPU's micro-batching: a tight budget costs
// tile size, not a fall back to "direct"). "tiled_gemm_small" is the same with
// small tiles, for budgets where the larger ones do not fit. Both need a filter of
// at most 32 x 32. "direct" has a vectorised path for depthwise layers (one input
// channel per group).
//
// Every backward function takes `accumulate`: false writes its output, true
// adds to it (gradient accumulation over sub-batches, moDNN §III; the first
// writer writes, later ones add). conv_forward takes it too, for symmetry.

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/types.h"

namespace mplan::rt::cpu {


// The CPU algorithms; ConvAlgoId (runtime/types.h) is the enum value.
enum class ConvAlgo : ConvAlgoId { direct = 0, gemm = 1, winograd = 2, tiled_gemm = 3, tiled_gemm_small = 4 };

inline constexpr ConvAlgo kConvAlgos[] = {ConvAlgo::direct, ConvAlgo::gemm, ConvAlgo::winograd,
                                          ConvAlgo::tiled_gemm, ConvAlgo::tiled_gemm_small};

// "direct", "gemm", "winograd", "tiled_gemm", "tiled_gemm_small".
const char* conv_algo_name(ConvAlgo algo);
// The algorithm with that name; false if there is none.
bool conv_algo_from_name(const std::string& name, ConvAlgo* algo);
const char* conv_direction_name(ConvDirection direction);

// Whether the algorithm implements this direction for this shape.
bool conv_algo_supported(ConvAlgo algo, ConvDirection direction, const ConvShape& shape);
// Workspace the algorithm needs for this direction and shape (shape.n images), in
// bytes; 0 for direct. Only meaningful where conv_algo_supported.
size_t conv_workspace_bytes(ConvAlgo algo, ConvDirection direction, const ConvShape& shape);

// y = conv(x, w) + bias (bias may be null). workspace: at least
// conv_workspace_bytes(algo, forward, shape) bytes (may be null when 0).
void conv_forward(ConvAlgo algo, const ConvShape& shape, const float* x, const float* w,
                  const float* bias, float* y, void* workspace, size_t workspace_bytes,
                  bool accumulate = false);
// dx = conv_transpose(dy, w): the gradient with respect to the input (BP1).
void conv_backward_data(ConvAlgo algo, const ConvShape& shape, const float* w, const float* dy,
                        float* dx, void* workspace, size_t workspace_bytes, bool accumulate);
// dw = correlation of x with dy over the batch: the filter gradient (BP2).
void conv_backward_filter(ConvAlgo algo, const ConvShape& shape, const float* x,
                          const float* dy, float* dw, void* workspace, size_t workspace_bytes,
                          bool accumulate);
// dbias[k] = sum over n, p, q of dy (no algorithm choice, no workspace).
void conv_backward_bias(const ConvShape& shape, const float* dy, float* dbias, bool accumulate);


// Workspace a micro-batched call needs: the largest of its micro-batches' (WR:
// the micro-batches run one after another and share one workspace).
size_t conv_micro_workspace_bytes(ConvDirection direction, const ConvShape& shape,
                                  const ConvMicroBatch* micro, int count);

// The same convolution as the undivided call, run over consecutive slices of the
// batch (shape.n must equal the sum of micro[i].n). Forward and backward-data
// slices are independent; backward-filter slices accumulate into dw, the first
// one honouring `accumulate` (mu-cuDNN §II: BackwardFilter is split by
// accumulating, "output scale" in cuDNN).
void conv_forward_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                        const float* x, const float* w, const float* bias, float* y,
                        void* workspace, size_t workspace_bytes, bool accumulate = false);
void conv_backward_data_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                              const float* w, const float* dy, float* dx, void* workspace,
                              size_t workspace_bytes, bool accumulate);
void conv_backward_filter_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                                const float* x, const float* dy, float* dw, void* workspace,
                                size_t workspace_bytes, bool accumulate);

// The algorithms one by one (called by the dispatchers above; exposed for tests).
// Preconditions as above, not re-checked.
void conv_forward_direct(const ConvShape& shape, const float* x, const float* w, float* y,
                         bool accumulate);
void conv_backward_data_direct(const ConvShape& shape, const float* w, const float* dy,
                               float* dx, bool accumulate);
void conv_backward_filter_direct(const ConvShape& shape, const float* x, const float* dy,
                                 float* dw, bool accumulate);
size_t conv_gemm_workspace_bytes(const ConvShape& shape);
void conv_forward_gemm(const ConvShape& shape, const float* x, const float* w, float* y,
                       float* workspace, bool accumulate);
void conv_backward_data_gemm(const ConvShape& shape, const float* w, const float* dy, float* dx,
                             float* workspace, bool accumulate);
void conv_backward_filter_gemm(const ConvShape& shape, const float* x, const float* dy,
                               float* dw, float* workspace, bool accumulate);
bool conv_winograd_supported(ConvDirection direction, const ConvShape& shape);
size_t conv_winograd_workspace_bytes(ConvDirection direction, const ConvShape& shape);
void conv_forward_winograd(const ConvShape& shape, const float* x, const float* w, float* y,
                           float* workspace, bool accumulate);
void conv_backward_data_winograd(const ConvShape& shape, const float* w, const float* dy,
                                 float* dx, float* workspace, bool accumulate);
// tiled_gemm and tiled_gemm_small (algo selects the tile sizes).
size_t conv_tiled_gemm_workspace_bytes(ConvAlgo algo, ConvDirection direction, const ConvShape& shape);
void conv_forward_tiled_gemm(ConvAlgo algo, const ConvShape& shape, const float* x, const float* w, float* y,
                             float* workspace, bool accumulate);
void conv_backward_data_tiled_gemm(ConvAlgo algo, const ConvShape& shape, const float* w, const float* dy, float* dx,
                                   float* workspace, bool accumulate);
void conv_backward_filter_tiled_gemm(ConvAlgo algo, const ConvShape& shape, const float* x, const float* dy,
                                     float* dw, float* workspace, bool accumulate);

// ---- convolutions the general algorithms do not take (conv_general.cpp) ------------------------
// Dilated convolutions (any groups) and depthwise ones (groups = c, one input
// channel per group): a direct loop nest per output plane, no workspace. The
// dispatcher (conv.cpp) routes such shapes here whatever the planned
// algorithm, and reports only "direct" as supported for them.
bool conv_takes_general_path(const ConvShape& shape);
void conv_forward_general(const ConvShape& shape, const float* x, const float* w, float* y, bool accumulate);
void conv_backward_data_general(const ConvShape& shape, const float* w, const float* dy, float* dx, bool accumulate);
void conv_backward_filter_general(const ConvShape& shape, const float* x, const float* dy, float* dw,
                                  bool accumulate);

}  // namespace mplan::rt::cpu
