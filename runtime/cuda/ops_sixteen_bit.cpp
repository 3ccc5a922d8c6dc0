// The CUDA backend of runtime/ops_sixteen_bit.h, the linear layers:
// cublasGemmEx on 16-bit matrices with CUBLAS_COMPUTE_32F, so the products
// accumulate in float on tensor cores and each result is rounded once to
// the 16-bit type (PyTorch autocast's addmm and mm). The layout is the float
// kernels' (ops.cpp): a row-major matrix is cuBLAS's column-major transpose.
// The convolutions are in conv.cpp.

#include <cublas_v2.h>

#include "runtime/check.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cublas_args.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

using cuda::Launch;
using cuda::to_int;

cudaDataType_t cuda_type(int64_t type) {
  MPLAN_RT_CHECK(type == static_cast<int64_t>(StorageType::bfloat16) ||
                     type == static_cast<int64_t>(StorageType::float16),
                 "a 16-bit linear layer's type that is neither bfloat16 nor float16");
  return type == static_cast<int64_t>(StorageType::bfloat16) ? CUDA_R_16BF : CUDA_R_16F;
}

// C (m x n, column-major) = op(A) (m x k) * op(B) (k x n) + beta * C, every
// matrix of `type`, accumulated in float.
void gemm_16(Launch& L, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const void* a, int lda,
             const void* b, int ldb, const float* beta, void* c, int ldc, int64_t type) {
  const cudaDataType_t t = cuda_type(type);
  MPLAN_CUBLAS_CHECK(cublasGemmEx(L.cublas(), op_a, op_b, m, n, k, &cuda::kOne, a, t, lda, b, t, ldb, beta, c, t, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void linear_forward_16(const Context& ctx, const uint8_t* x, const uint8_t* w, const uint8_t* bias, uint8_t* y,
                       int64_t n, int64_t in, int64_t out, int64_t type) {
  cuda_type(type);
  if (n == 0 || out == 0) return;
  Launch L(ctx);
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  // The bias first, then the product added to it in float: one rounding.
  if (bias != nullptr) cuda::broadcast_rows_16(bias, y, n, out, L.stream());
  // y^T (out x n) = w (out x in; stored as w^T, in x out) ^T * x^T (in x n)
  gemm_16(L, CUBLAS_OP_T, CUBLAS_OP_N, out_, n_, in_, w, in_, x, in_, cuda::beta_of(bias != nullptr), y, out_, type);
}

void linear_backward_data_16(const Context& ctx, const uint8_t* w, const uint8_t* dy, uint8_t* dx, int64_t n,
                             int64_t in, int64_t out, int64_t type) {
  cuda_type(type);
  if (n == 0 || in == 0) return;
  Launch L(ctx);
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  // dx^T (in x n) = w^T (in x out) * dy^T (out x n)
  gemm_16(L, CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, w, in_, dy, out_, &cuda::kZero, dx, in_, type);
}

void linear_backward_weights_16(const Context& ctx, const uint8_t* x, const uint8_t* dy, uint8_t* dw, int64_t n,
                                int64_t in, int64_t out, int64_t type) {
  cuda_type(type);
  if (in == 0 || out == 0) return;
  Launch L(ctx);
  if (n == 0) {
    // No samples: the gradient is zero (the float kernel adds nothing to its zeros).
    MPLAN_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(in * out * 2), L.stream()));
    return;
  }
  const int n_ = to_int(n, "linear: batch"), in_ = to_int(in, "linear: in"), out_ = to_int(out, "linear: out");
  // dw^T (in x out) = x^T (in x n) * dy (n x out; stored as dy^T, out x n)
  gemm_16(L, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, x, in_, dy, out_, &cuda::kZero, dw, in_, type);
}

}  // namespace mplan::rt
