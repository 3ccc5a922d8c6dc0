#pragma once
// The device half of the backend-neutral runtime API: streams, events, the one
// device allocation, pinned host memory and copies. runtime/cpu and
// runtime/cuda implement it; a program links exactly one of them.
//
// Semantics are CUDA's on both backends. A Stream runs what is enqueued on it
// in order (a cudaStream_t; on the CPU a thread with a FIFO). An Event marks a
// point of a stream: event_record enqueues the mark, stream_wait_event makes a
// stream wait (before anything enqueued after the wait) until the most recent
// record of the event as of the call has run; waiting for an event never
// recorded returns at once. Copies on the copy streams really run
// concurrently with the compute stream, so a wait missing from a schedule is a
// real race on either backend.

#include <cstddef>
#include <cstdint>
#include <string>

namespace mplan::rt {

struct Stream;  // defined by the backend
struct Event;   // defined by the backend

// What an op runs on: the stream it is enqueued on, with the backend's library
// handles bound to it (cuDNN and cuBLAS on CUDA). A null stream on the CPU
// backend runs the op at once on the calling thread (tests, the profilers).
struct Context {
  Stream* stream = nullptr;
};

// ---- streams and events ---------------------------------------------------------

// A new stream named for messages ("compute", "h2d", "d2h"). Aborts on failure.
Stream* stream_create(const char* name);
// Runs everything already enqueued, then frees the stream.
void stream_destroy(Stream* stream);
// Blocks the host until everything enqueued on the stream so far has run.
void stream_synchronize(Stream* stream);

Event* event_create();
void event_destroy(Event* event);
// Enqueues the event's mark on the stream (cudaEventRecord).
void event_record(Event* event, Stream* stream);
// Work enqueued on `stream` after this call waits until the event's latest
// record, as of this call, has run (cudaStreamWaitEvent).
void stream_wait_event(Stream* stream, Event* event);
// Whether the event's latest record has run (cudaEventQuery == cudaSuccess).
bool event_query(Event* event);
// Blocks the host until the event's latest record has run.
void event_synchronize(Event* event);
// Milliseconds between two completed records (cudaEventElapsedTime).
float event_elapsed_ms(Event* start, Event* end);

// ---- memory ---------------------------------------------------------------------

// Every device offset the plan gives is a multiple of this (cudaMalloc's).
inline constexpr size_t kDeviceAlignmentBytes = 256;

// The program's one device allocation (llm.c's single cudaMalloc): the plan
// places every block at a fixed offset in it, so nothing is allocated on the
// device during a step.
struct DeviceMemory {
  std::byte* base = nullptr;
  size_t size_bytes = 0;
};
// Allocates size_bytes (rounded up to the alignment). Returns an empty
// DeviceMemory and sets *error when the device cannot give that much.
DeviceMemory device_alloc(size_t size_bytes, std::string* error);
void device_free(DeviceMemory& memory);

// Pinned host memory (cudaHostAlloc, mapped, on CUDA; aligned memory on the CPU) for
// offloaded blocks and the input data of each round.
struct HostMemory {
  std::byte* base = nullptr;
  size_t size_bytes = 0;
};
HostMemory host_alloc(size_t size_bytes, std::string* error);
void host_free(HostMemory& memory);

// ---- copies and fills (asynchronous on the stream) ------------------------------

void copy_to_device_async(void* device_dst, const void* host_src, size_t bytes, Stream* stream);
void copy_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream);
// Device memory to device memory (cudaMemcpyDeviceToDevice); the ranges must not overlap.
void copy_on_device_async(void* device_dst, const void* device_src, size_t bytes, Stream* stream);
// A few bytes (a round's loss) from device memory into host memory from
// host_alloc, in the stream's order, by the stream's own work: on CUDA a
// kernel stores through the pinned memory's device mapping. A copy
// (copy_to_host_async) runs on a copy engine, where it can queue behind the
// d2h stream's offloads (which engine a stream gets is the driver's choice):
// in ResNet-50's 6 GiB program on an H200 the compute stream waited 18.6 ms
// there for its loss (docs/gpu-validation.md, "What the timeline found, and
// the three fixes").
void store_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream);
// Fills bytes / 4 words of device memory with `pattern` (zeros, or the poison NaN).
void fill_u32_async(void* device_dst, uint32_t pattern, size_t bytes, Stream* stream);
// Debug only (--debug-copy-delay-ms): the stream idles for ms milliseconds
// before what is enqueued after this, so a missing wait really races.
void stream_sleep_async(Stream* stream, int ms);
// Synchronous copies for start-up and checkpoints (the device is idle then).
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);

// ---- the backend ----------------------------------------------------------------

// The arithmetic of convolutions and GEMMs (docs/cost-model.md, "Math modes"),
// set once before the first op: "fp32" (every backend; on CUDA
// CUDNN_FMA_MATH and CUBLAS_DEFAULT_MATH, no tensor cores) or "tf32" (CUDA on
// Ampere and later: CUDNN_DEFAULT_MATH and CUBLAS_TF32_TENSOR_OP_MATH, as
// PyTorch's allow_tf32), or a 16-bit program's "bf16" or "fp16" (every
// backend: its casts and 16-bit kernels give the precision,
// runtime/ops_casts.h; the float kernels between casts compute as at
// "fp32"). false with *error for a mode the backend does not have.
bool set_math_mode(const std::string& mode, std::string* error);
const std::string& math_mode();

struct BackendInfo {
  std::string backend;        // "cpu" or "cuda"
  std::string device;         // "NVIDIA H100 80GB HBM3", or the CPU's model name
  std::string driver;         // CUDA driver version; "" on the CPU
  std::string runtime;        // CUDA runtime version; "" on the CPU
  std::string libraries;      // "cuDNN 9.1.0, cuBLAS 13.0.0"; "OpenBLAS" on the CPU
  int64_t memory_bytes = 0;   // the device's memory (total)
  int64_t free_memory_bytes = 0;
};
BackendInfo backend_info();

}  // namespace mplan::rt
