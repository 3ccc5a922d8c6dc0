// The CUDA backend of runtime/device.h: streams with their library handles,
// events, the one cudaMalloc, pinned host memory, asynchronous copies.
//
// Streams are created blocking (cudaStreamCreate), so the synchronous copies
// of start-up and checkpoints (cudaMemcpy on the legacy default stream) are
// ordered with them; the compute and copy streams still run concurrently with
// each other, ordered only by the plan's events (runtime/device.h).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "runtime/check.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt {
namespace {

size_t round_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

// The stream of a null context: the legacy default stream (CUDA's stream 0).
Stream& default_stream() {
  static Stream* stream = [] {
    auto* s = new Stream;  // lives as long as the process: handles are not torn down at exit
    s->name = "default";
    s->stream = nullptr;
    return s;
  }();
  return *stream;
}

std::mutex& handle_mutex() {
  static std::mutex mutex;
  return mutex;
}

cudaStream_t stream_of(Stream* stream) { return stream == nullptr ? nullptr : stream->stream; }

// A null stream in a device.h call runs at once, as on the CPU backend.
void finish_if_null(Stream* stream) {
  if (stream == nullptr) MPLAN_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

std::string version_text(int version) {  // CUDA's 1000 * major + 10 * minor
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

// ---- the context's stream and handles (cuda::Launch, stream.h) ------------------------------

namespace cuda {

Launch::Launch(const Context& ctx)
    : stream_(ctx.stream != nullptr ? ctx.stream : &default_stream()), synchronous_(ctx.stream == nullptr) {}

Launch::~Launch() {
  if (synchronous_) MPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_->stream));
}

cudnnHandle_t Launch::cudnn() {
  std::lock_guard<std::mutex> lock(handle_mutex());
  if (stream_->cudnn == nullptr) {
    MPLAN_CUDNN_CHECK(cudnnCreate(&stream_->cudnn));
    MPLAN_CUDNN_CHECK(cudnnSetStream(stream_->cudnn, stream_->stream));
  }
  return stream_->cudnn;
}

cublasHandle_t Launch::cublas() {
  std::lock_guard<std::mutex> lock(handle_mutex());
  if (stream_->cublas == nullptr) {
    MPLAN_CUBLAS_CHECK(cublasCreate(&stream_->cublas));
    MPLAN_CUBLAS_CHECK(cublasSetStream(stream_->cublas, stream_->stream));
    // After cublasSetStream, which resets the workspace to cuBLAS's own pool:
    // no workspace at all, so cuBLAS allocates no device memory during steps.
    MPLAN_CUBLAS_CHECK(cublasSetWorkspace(stream_->cublas, nullptr, 0));
    // FP32 SGEMM, with TF32 tensor cores only in tf32 math (stream.h).
    MPLAN_CUBLAS_CHECK(
        cublasSetMathMode(stream_->cublas, tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
  return stream_->cublas;
}

}  // namespace cuda

// ---- streams and events ----------------------------------------------------------------------

Stream* stream_create(const char* name) {
  auto* stream = new Stream;
  stream->name = name == nullptr ? "stream" : name;
  MPLAN_CUDA_CHECK(cudaStreamCreate(&stream->stream));
  return stream;
}

void stream_destroy(Stream* stream) {
  if (stream == nullptr) return;
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(stream->stream));
  if (stream->cublas != nullptr) MPLAN_CUBLAS_CHECK(cublasDestroy(stream->cublas));
  if (stream->cudnn != nullptr) MPLAN_CUDNN_CHECK(cudnnDestroy(stream->cudnn));
  MPLAN_CUDA_CHECK(cudaStreamDestroy(stream->stream));
  delete stream;
}

void stream_synchronize(Stream* stream) { MPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_of(stream))); }

Event* event_create() {
  auto* event = new Event;
  MPLAN_CUDA_CHECK(cudaEventCreate(&event->event));  // default flags: timing enabled
  return event;
}

void event_destroy(Event* event) {
  if (event == nullptr) return;
  MPLAN_CUDA_CHECK(cudaEventDestroy(event->event));
  delete event;
}

void event_record(Event* event, Stream* stream) { MPLAN_CUDA_CHECK(cudaEventRecord(event->event, stream_of(stream))); }

// An event never recorded is no wait at all (cudaStreamWaitEvent), as device.h says.
void stream_wait_event(Stream* stream, Event* event) {
  MPLAN_CUDA_CHECK(cudaStreamWaitEvent(stream_of(stream), event->event, 0));
}

bool event_query(Event* event) {
  const cudaError_t status = cudaEventQuery(event->event);
  if (status == cudaErrorNotReady) return false;
  MPLAN_CUDA_CHECK(status);
  return true;
}

void event_synchronize(Event* event) { MPLAN_CUDA_CHECK(cudaEventSynchronize(event->event)); }

float event_elapsed_ms(Event* start, Event* end) {
  float ms = 0.0f;
  MPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start->event, end->event));
  return ms;
}

// ---- memory -----------------------------------------------------------------------------------

DeviceMemory device_alloc(size_t size_bytes, std::string* error) {
  const size_t rounded = round_up(size_bytes, kDeviceAlignmentBytes);
  void* base = nullptr;
  const cudaError_t status = cudaMalloc(&base, rounded == 0 ? kDeviceAlignmentBytes : rounded);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    size_t free_bytes = 0, total_bytes = 0;
    std::string free_text;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
      free_text = " (the device has " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                  " bytes free)";
    else
      (void)cudaGetLastError();
    if (error)
      *error = "cannot allocate " + std::to_string(rounded) + " bytes of device memory: cudaMalloc: " +
               cudaGetErrorString(status) + free_text;
    return DeviceMemory{};
  }
  DeviceMemory memory;
  memory.base = static_cast<std::byte*>(base);
  memory.size_bytes = rounded;
  return memory;
}

void device_free(DeviceMemory& memory) {
  if (memory.base != nullptr) MPLAN_CUDA_CHECK(cudaFree(memory.base));
  memory = DeviceMemory{};
}

HostMemory host_alloc(size_t size_bytes, std::string* error) {
  void* base = nullptr;
  const cudaError_t status = cudaHostAlloc(&base, size_bytes == 0 ? 1 : size_bytes, cudaHostAllocMapped);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (error)
      *error = "cannot allocate " + std::to_string(size_bytes) + " bytes of pinned host memory: cudaHostAlloc: " +
               cudaGetErrorString(status);
    return HostMemory{};
  }
  HostMemory memory;
  memory.base = static_cast<std::byte*>(base);
  memory.size_bytes = size_bytes;
  return memory;
}

void host_free(HostMemory& memory) {
  if (memory.base != nullptr) MPLAN_CUDA_CHECK(cudaFreeHost(memory.base));
  memory = HostMemory{};
}

// ---- copies and fills -------------------------------------------------------------------------

void copy_to_device_async(void* device_dst, const void* host_src, size_t bytes, Stream* stream) {
  if (bytes == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_of(stream)));
  finish_if_null(stream);
}

void copy_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream) {
  if (bytes == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_of(stream)));
  finish_if_null(stream);
}

void copy_on_device_async(void* device_dst, const void* device_src, size_t bytes, Stream* stream) {
  if (bytes == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream_of(stream)));
  finish_if_null(stream);
}

void store_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream) {
  if (bytes == 0) return;
  void* mapped = nullptr;  // host_alloc's memory is mapped (cudaHostAllocMapped)
  MPLAN_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host_dst, 0));
  cuda::copy_bytes(device_src, mapped, bytes, stream_of(stream));
  finish_if_null(stream);
}

void fill_u32_async(void* device_dst, uint32_t pattern, size_t bytes, Stream* stream) {
  cuda::fill_u32(device_dst, pattern, bytes, stream_of(stream));
  finish_if_null(stream);
}

namespace {
// Runs on CUDA's host-callback thread when the stream reaches it (no CUDA calls allowed there).
void CUDART_CB sleep_callback(void* milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(milliseconds)));
}
}  // namespace

void stream_sleep_async(Stream* stream, int ms) {
  if (ms <= 0) return;
  MPLAN_CUDA_CHECK(
      cudaLaunchHostFunc(stream_of(stream), sleep_callback, reinterpret_cast<void*>(static_cast<intptr_t>(ms))));
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  MPLAN_CUDA_CHECK(cudaDeviceSynchronize());  // a pageable source returns before the DMA ends
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

// ---- the backend ------------------------------------------------------------------------------

namespace {
std::string& current_math_mode() {
  static std::string mode = "fp32";
  return mode;
}
}  // namespace

bool cuda::tf32_enabled() { return current_math_mode() == "tf32"; }

bool set_math_mode(const std::string& mode, std::string* error) {
  // bf16 and fp16: a 16-bit program, whose float kernels compute as at fp32
  // between its casts (its 16-bit kernels run on tensor cores at any mode).
  if (mode != "fp32" && mode != "tf32" && mode != "bf16" && mode != "fp16") {
    if (error) *error = "the CUDA backend computes in fp32, tf32, bf16 or fp16, not " + mode;
    return false;
  }
  if (mode == "tf32") {
    int device = 0, major = 0;
    MPLAN_CUDA_CHECK(cudaGetDevice(&device));
    MPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 8) {
      if (error) *error = "TF32 needs compute capability 8.0 (Ampere) or later, this GPU has " + std::to_string(major) + ".x";
      return false;
    }
  }
  current_math_mode() = mode;
  return true;
}

const std::string& math_mode() { return current_math_mode(); }

BackendInfo backend_info() {
  BackendInfo info;
  info.backend = "cuda";
  const size_t cudnn = cudnnGetVersion();  // 10000 * major + 100 * minor + patch since cuDNN 9
  int blas[3] = {0, 0, 0};
  cublasGetProperty(MAJOR_VERSION, &blas[0]);
  cublasGetProperty(MINOR_VERSION, &blas[1]);
  cublasGetProperty(PATCH_LEVEL, &blas[2]);
  const std::string math = cuda::tf32_enabled() ? "FP32, TF32 on" : "FP32, TF32 off";
  info.libraries = "cuDNN " + std::to_string(cudnn / 10000) + "." + std::to_string(cudnn % 10000 / 100) + "." +
                   std::to_string(cudnn % 100) + " (" + math + "), cuBLAS " + std::to_string(blas[0]) + "." +
                   std::to_string(blas[1]) + "." + std::to_string(blas[2]) + " (" + math + ", no workspace)";
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) info.runtime = version_text(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) info.driver = version_text(driver);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    info.device = std::string("no CUDA device (") +
                  (status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found none") + ")";
    return info;
  }
  int device = 0;
  cudaDeviceProp properties{};
  MPLAN_CUDA_CHECK(cudaGetDevice(&device));
  MPLAN_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  info.device = properties.name;
  size_t free_bytes = 0, total_bytes = 0;
  MPLAN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  info.memory_bytes = static_cast<int64_t>(total_bytes);
  info.free_memory_bytes = static_cast<int64_t>(free_bytes);
  return info;
}

}  // namespace mplan::rt
