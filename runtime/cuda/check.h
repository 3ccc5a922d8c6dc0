#pragma once
// Checks of every CUDA, cuDNN and cuBLAS call of the CUDA backend (llm.c's
// cudaCheck): a failure prints the call, file, line and the library's message,
// then aborts, in every build type. The runtime's own invariants use
// MPLAN_RT_CHECK (runtime/check.h).
//
// cuDNN 9 marks its legacy API (convolution, pooling, activation and batch-norm
// descriptors and calls) deprecated. The backend is built with
// CUDNN_WARN_DEPRECATED so that every such use warns, except inside
// MPLAN_CUDNN_LEGACY_BEGIN / MPLAN_CUDNN_LEGACY_END, which silence exactly that
// warning (-Wdeprecated-declarations) around the code that calls the legacy API
// on purpose: its algorithm enums are the ids the planner chooses among
// (runtime/cuda/conv.cpp), so the API is used and only that warning is
// silenced, only there.

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>

namespace mplan::rt::cuda {

[[noreturn]] inline void library_failed(const char* library, const char* call, const char* file, int line,
                                        const char* message) {
  std::fprintf(stderr, "mplan runtime: %s call failed at %s:%d: %s: %s\n", library, file, line, call, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace mplan::rt::cuda

#define MPLAN_CUDA_CHECK(call)                                                                      \
  do {                                                                                              \
    const cudaError_t mplan_status_ = (call);                                                       \
    if (mplan_status_ != cudaSuccess)                                                               \
      ::mplan::rt::cuda::library_failed("CUDA", #call, __FILE__, __LINE__,                          \
                                        cudaGetErrorString(mplan_status_));                         \
  } while (0)

#define MPLAN_CUDNN_CHECK(call)                                                                     \
  do {                                                                                              \
    const cudnnStatus_t mplan_status_ = (call);                                                     \
    if (mplan_status_ != CUDNN_STATUS_SUCCESS)                                                      \
      ::mplan::rt::cuda::library_failed("cuDNN", #call, __FILE__, __LINE__,                         \
                                        cudnnGetErrorString(mplan_status_));                        \
  } while (0)

#define MPLAN_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                              \
    const cublasStatus_t mplan_status_ = (call);                                                    \
    if (mplan_status_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::mplan::rt::cuda::library_failed("cuBLAS", #call, __FILE__, __LINE__,                        \
                                        cublasGetStatusString(mplan_status_));                      \
  } while (0)

// After a kernel launch: a bad configuration shows at once, not at the next call.
#define MPLAN_CUDA_CHECK_LAUNCH() MPLAN_CUDA_CHECK(cudaGetLastError())

#define MPLAN_CUDNN_LEGACY_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define MPLAN_CUDNN_LEGACY_END _Pragma("GCC diagnostic pop")
