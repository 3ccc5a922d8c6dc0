#pragma once
// The CUDA backend's streams and events (runtime/device.h): a Stream is a
// cudaStream_t with a cuDNN and a cuBLAS handle bound to it, created on the
// stream's first op (copy streams never create them: cudnnCreate is slow and
// takes device memory). An Event is a cudaEvent_t with timing enabled.
//
// Library settings for every handle, by the math mode (set_math_mode; the
// default, and the plan's unless it was priced in TF32, is fp32, TF32 off):
//   - cuBLAS: fp32: CUBLAS_DEFAULT_MATH, which never uses TF32 tensor cores
//     for SGEMM; tf32: CUBLAS_TF32_TENSOR_OP_MATH (cublas_api.h); and no
//     workspace: cublasSetWorkspace(handle, nullptr, 0) after cublasSetStream,
//     because cublasSetStream resets the workspace to cuBLAS's own pool, which
//     cuBLAS would cudaMalloc outside the plan's budget (cuBLAS docs,
//     cublasSetStream / cublasSetWorkspace; PyTorch's CublasHandlePool.cpp
//     sets its workspace the same way).
//   - cuDNN convolutions: fp32: CUDNN_FMA_MATH on each convolution descriptor
//     (conv.cpp), as PyTorch and Paddle do when TF32 is disallowed; tf32:
//     CUDNN_DEFAULT_MATH, as PyTorch does with cudnn.allow_tf32.

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "runtime/device.h"

namespace mplan::rt {

namespace cuda {
// Whether convolutions and GEMMs may use TF32 tensor cores (set_math_mode).
bool tf32_enabled();
}  // namespace cuda

struct Stream {
  std::string name;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;    // created by the first op (cuda::Launch)
  cublasHandle_t cublas = nullptr;  // likewise
};

struct Event {
  cudaEvent_t event = nullptr;
};

namespace cuda {

// Where an op is enqueued. A context with a stream: that stream, nothing
// waited for. A null context (tests, profilers): the legacy default stream,
// and the destructor waits for the op, so it has run when the call returns,
// as on the CPU backend.
class Launch {
 public:
  explicit Launch(const Context& ctx);
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  cudaStream_t stream() const { return stream_->stream; }
  // The stream's library handles, created on first use.
  cudnnHandle_t cudnn();
  cublasHandle_t cublas();

 private:
  Stream* stream_;
  bool synchronous_;
};

// Kernel launch shape for `count` independent elements: a grid-stride loop
// over at most `kMaxBlocks` blocks of kThreads.
inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 65535;
inline unsigned blocks_for(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

}  // namespace cuda
}  // namespace mplan::rt
