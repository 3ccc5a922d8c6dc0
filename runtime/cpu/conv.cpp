// Dispatch of the CPU convolution algorithms, their workspaces, and the
// micro-batched convolution (mu-cuDNN §II-III).

#include <cstring>

#include "runtime/check.h"
#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/im2col.h"
#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/vector_ops.h"

namespace mplan::rt::cpu {

const char* conv_algo_name(ConvAlgo algo) {
  switch (algo) {
    case ConvAlgo::direct: return "direct";
    case ConvAlgo::gemm: return "gemm";
    case ConvAlgo::winograd: return "winograd";
    case ConvAlgo::tiled_gemm: return "tiled_gemm";
    case ConvAlgo::tiled_gemm_small: return "tiled_gemm_small";
  }
  return "?";
}

bool conv_algo_from_name(const std::string& name, ConvAlgo* algo) {
  for (ConvAlgo a : kConvAlgos) {
    if (name == conv_algo_name(a)) {
      *algo = a;
      return true;
    }
  }
  return false;
}

const char* conv_direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::forward: return "forward";
    case ConvDirection::backward_data: return "backward_data";
    case ConvDirection::backward_filter: return "backward_filter";
  }
  return "?";
}

bool conv_algo_supported(ConvAlgo algo, ConvDirection direction, const ConvShape& shape) {
  if (!shape.valid()) return false;
  // Dilated shapes run conv_general.cpp's loops, as "direct".
  if (conv_takes_general_path(shape)) return algo == ConvAlgo::direct;
  switch (algo) {
    case ConvAlgo::direct:
    case ConvAlgo::gemm: return true;
    case ConvAlgo::tiled_gemm:
    case ConvAlgo::tiled_gemm_small: return cpu::Im2colPacker::supports(shape.r, shape.s);
    case ConvAlgo::winograd: return cpu::conv_winograd_supported(direction, shape);
  }
  return false;
}

size_t conv_workspace_bytes(ConvAlgo algo, ConvDirection direction, const ConvShape& shape) {
  switch (algo) {
    case ConvAlgo::direct: return 0;
    case ConvAlgo::gemm: return cpu::conv_gemm_workspace_bytes(shape);
    case ConvAlgo::winograd: return cpu::conv_winograd_workspace_bytes(direction, shape);
    case ConvAlgo::tiled_gemm:
    case ConvAlgo::tiled_gemm_small: return cpu::conv_tiled_gemm_workspace_bytes(algo, direction, shape);
  }
  return 0;
}

namespace {

float* checked_workspace(ConvAlgo algo, ConvDirection direction, const ConvShape& shape,
                         void* workspace, size_t workspace_bytes) {
  MPLAN_RT_CHECK(shape.valid(), "invalid convolution shape");
  MPLAN_RT_CHECK(conv_algo_supported(algo, direction, shape),
                 "convolution algorithm does not support this direction and shape");
  size_t needed = conv_workspace_bytes(algo, direction, shape);
  MPLAN_RT_CHECK(workspace_bytes >= needed, "convolution workspace is too small");
  MPLAN_RT_CHECK(needed == 0 || workspace != nullptr, "convolution workspace is null");
  return static_cast<float*>(workspace);
}

}  // namespace

void conv_forward(ConvAlgo algo, const ConvShape& shape, const float* x, const float* w,
                  const float* bias, float* y, void* workspace, size_t workspace_bytes,
                  bool accumulate) {
  OpTimer timer(OpKind::conv_forward);
  float* ws = checked_workspace(algo, ConvDirection::forward, shape, workspace, workspace_bytes);
  switch (algo) {
    case ConvAlgo::direct:
      if (conv_takes_general_path(shape))
        conv_forward_general(shape, x, w, y, accumulate);
      else
        conv_forward_direct(shape, x, w, y, accumulate);
      break;
    case ConvAlgo::gemm: conv_forward_gemm(shape, x, w, y, ws, accumulate); break;
    case ConvAlgo::winograd: conv_forward_winograd(shape, x, w, y, ws, accumulate); break;
    case ConvAlgo::tiled_gemm:
    case ConvAlgo::tiled_gemm_small: conv_forward_tiled_gemm(algo, shape, x, w, y, ws, accumulate); break;
  }
  if (bias == nullptr) return;
  const int64_t PQ = shape.p() * shape.q();
  for (int64_t n = 0; n < shape.n; ++n)
    for (int64_t k = 0; k < shape.k; ++k)
      cpu::set_or_add_scalar(y + (n * shape.k + k) * PQ, PQ, bias[k], /*accumulate=*/true);
}

void conv_backward_data(ConvAlgo algo, const ConvShape& shape, const float* w, const float* dy,
                        float* dx, void* workspace, size_t workspace_bytes, bool accumulate) {
  OpTimer timer(OpKind::conv_backward_data);
  float* ws =
      checked_workspace(algo, ConvDirection::backward_data, shape, workspace, workspace_bytes);
  switch (algo) {
    case ConvAlgo::direct:
      if (conv_takes_general_path(shape))
        conv_backward_data_general(shape, w, dy, dx, accumulate);
      else
        conv_backward_data_direct(shape, w, dy, dx, accumulate);
      break;
    case ConvAlgo::gemm: conv_backward_data_gemm(shape, w, dy, dx, ws, accumulate); break;
    case ConvAlgo::winograd:
      cpu::conv_backward_data_winograd(shape, w, dy, dx, ws, accumulate);
      break;
    case ConvAlgo::tiled_gemm:
    case ConvAlgo::tiled_gemm_small:
      cpu::conv_backward_data_tiled_gemm(algo, shape, w, dy, dx, ws, accumulate);
      break;
  }
}

void conv_backward_filter(ConvAlgo algo, const ConvShape& shape, const float* x,
                          const float* dy, float* dw, void* workspace, size_t workspace_bytes,
                          bool accumulate) {
  OpTimer timer(OpKind::conv_backward_filter);
  float* ws =
      checked_workspace(algo, ConvDirection::backward_filter, shape, workspace, workspace_bytes);
  switch (algo) {
    case ConvAlgo::direct:
      if (conv_takes_general_path(shape))
        conv_backward_filter_general(shape, x, dy, dw, accumulate);
      else
        conv_backward_filter_direct(shape, x, dy, dw, accumulate);
      break;
    case ConvAlgo::gemm: conv_backward_filter_gemm(shape, x, dy, dw, ws, accumulate); break;
    case ConvAlgo::winograd: MPLAN_RT_CHECK(false, "winograd has no backward-filter"); break;
    case ConvAlgo::tiled_gemm:
    case ConvAlgo::tiled_gemm_small:
      cpu::conv_backward_filter_tiled_gemm(algo, shape, x, dy, dw, ws, accumulate);
      break;
  }
}

void conv_backward_bias(const ConvShape& shape, const float* dy, float* dbias, bool accumulate) {
  OpTimer timer(OpKind::conv_backward_bias);
  const int64_t PQ = shape.p() * shape.q();
  for (int64_t k = 0; k < shape.k; ++k) {
    double sum = 0.0;
    for (int64_t n = 0; n < shape.n; ++n) sum += cpu::sum_f32(dy + (n * shape.k + k) * PQ, PQ);
    dbias[k] = static_cast<float>(accumulate ? dbias[k] + sum : sum);
  }
}

// ---- micro-batched convolution (mu-cuDNN §II: loop tiling of the batch loop) ----

namespace {

ConvShape slice_of(const ConvShape& shape, int64_t n) {
  ConvShape slice = shape;
  slice.n = n;
  return slice;
}

void check_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count) {
  MPLAN_RT_CHECK(count >= 1, "micro-batched convolution with no micro-batches");
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    MPLAN_RT_CHECK(micro[i].n >= 1, "micro-batch of no images");
    total += micro[i].n;
  }
  MPLAN_RT_CHECK(total == shape.n, "micro-batches do not add up to the batch");
}

}  // namespace

size_t conv_micro_workspace_bytes(ConvDirection direction, const ConvShape& shape,
                                  const ConvMicroBatch* micro, int count) {
  size_t most = 0;
  for (int i = 0; i < count; ++i) {
    size_t bytes = conv_workspace_bytes(static_cast<ConvAlgo>(micro[i].algo), direction, slice_of(shape, micro[i].n));
    if (bytes > most) most = bytes;
  }
  return most;
}

void conv_forward_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                        const float* x, const float* w, const float* bias, float* y,
                        void* workspace, size_t workspace_bytes, bool accumulate) {
  OpTimer timer(OpKind::conv_forward);
  check_micro(shape, micro, count);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int i = 0; i < count; ++i) {
    conv_forward(static_cast<ConvAlgo>(micro[i].algo), slice_of(shape, micro[i].n), x + first * x_image, w, bias,
                 y + first * y_image, workspace, workspace_bytes, accumulate);
    first += micro[i].n;
  }
}

void conv_backward_data_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                              const float* w, const float* dy, float* dx, void* workspace,
                              size_t workspace_bytes, bool accumulate) {
  OpTimer timer(OpKind::conv_backward_data);
  check_micro(shape, micro, count);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int i = 0; i < count; ++i) {
    conv_backward_data(static_cast<ConvAlgo>(micro[i].algo), slice_of(shape, micro[i].n), w, dy + first * y_image,
                       dx + first * x_image, workspace, workspace_bytes, accumulate);
    first += micro[i].n;
  }
}

void conv_backward_filter_micro(const ConvShape& shape, const ConvMicroBatch* micro, int count,
                                const float* x, const float* dy, float* dw, void* workspace,
                                size_t workspace_bytes, bool accumulate) {
  OpTimer timer(OpKind::conv_backward_filter);
  check_micro(shape, micro, count);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int i = 0; i < count; ++i) {
    // Later slices add to the earlier ones' gradient ("output scale" beta = 1 in cuDNN).
    conv_backward_filter(static_cast<ConvAlgo>(micro[i].algo), slice_of(shape, micro[i].n), x + first * x_image,
                         dy + first * y_image, dw, workspace, workspace_bytes,
                         accumulate || i > 0);
    first += micro[i].n;
  }
}

}  // namespace mplan::rt::cpu
