// Where the generated program's copies lose time against the kernel
// profiler's (docs/gpu-validation.md). Standalone: CUDA only.
//
//   nvcc -O2 -o copy_probe bench/gpu/copy_probe.cu && ./copy_probe
//
// It prints, each a median of several runs:
//  1. a 256 MiB copy each way, the same pinned buffer every time (what
//     mplan_kernel_profiler times);
//  2. the same copies, each at a new place in a 4 GiB pinned region (what a
//     plan's offloads and prefetches do);
//  3. those copies beside a kernel on another stream, compute-bound and then
//     memory-bound;
//  4. those copies while every host thread writes memory (as the program's
//     make_input does during a step);
//  5. how long a compute stream's 4-byte device-to-host cudaMemcpyAsync, a
//     64 MiB device-to-device cudaMemcpyAsync and a 4-byte kernel store into
//     mapped pinned memory take while another stream's 1 GiB device-to-host
//     copy runs: whether they queue behind it on the copy engine.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__global__ void spin_kernel(float* out, int iterations) {  // compute-bound
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  for (int i = 0; i < iterations; ++i) a = a * b + 1e-7f;
  if (a == -1.0f) out[0] = a;
}

__global__ void stream_kernel(const float4* in, float4* out, size_t count, int passes) {  // memory-bound
  for (int p = 0; p < passes; ++p)
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{blockDim.x} * gridDim.x) {
      float4 v = in[i];
      v.x += 1.0f;
      out[i] = v;
    }
}

__global__ void store_kernel(const float* src, float* dst) { *dst = *src; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

float elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("copy_probe on %s (asyncEngineCount %d)\n", prop.name, prop.asyncEngineCount);
  const size_t copy_bytes = 256 * kMiB, region_bytes = 4096 * kMiB;
  char* host = nullptr;
  char* device = nullptr;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), region_bytes, cudaHostAllocMapped));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&device), 2048 * kMiB));
  for (size_t i = 0; i < region_bytes; i += 4096) host[i] = 1;  // touched, as a program's host area is
  cudaStream_t copy_stream, compute_stream;
  CHECK(cudaStreamCreate(&copy_stream));
  CHECK(cudaStreamCreate(&compute_stream));
  cudaEvent_t a, b, c, d;
  for (cudaEvent_t* e : {&a, &b, &c, &d}) CHECK(cudaEventCreate(e));

  // One copy at host offset `at`; GB/s.
  auto copy_gbps = [&](bool to_device, size_t at) {
    CHECK(cudaEventRecord(a, copy_stream));
    if (to_device)
      CHECK(cudaMemcpyAsync(device, host + at, copy_bytes, cudaMemcpyHostToDevice, copy_stream));
    else
      CHECK(cudaMemcpyAsync(host + at, device, copy_bytes, cudaMemcpyDeviceToHost, copy_stream));
    CHECK(cudaEventRecord(b, copy_stream));
    return copy_bytes / (elapsed(a, b) * 1e6);
  };
  for (int to_device = 1; to_device >= 0; --to_device) {
    const char* name = to_device ? "h2d" : "d2h";
    std::vector<double> same, sweep;
    for (int i = 0; i < 7; ++i) same.push_back(copy_gbps(to_device, 0));
    for (size_t at = copy_bytes; at + copy_bytes <= region_bytes; at += copy_bytes) sweep.push_back(copy_gbps(to_device, at));
    std::printf("%s 256 MiB: same buffer %.1f GB/s; a new place in 4 GiB each time %.1f GB/s (min %.1f, max %.1f)\n",
                name, median(same), median(sweep), *std::min_element(sweep.begin(), sweep.end()),
                *std::max_element(sweep.begin(), sweep.end()));
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> beside;
      for (int i = 0; i < 5; ++i) {
        if (kind == 0)
          spin_kernel<<<prop.multiProcessorCount * 8, 256, 0, compute_stream>>>(reinterpret_cast<float*>(device), 1000000);
        else
          stream_kernel<<<prop.multiProcessorCount * 8, 256, 0, compute_stream>>>(
              reinterpret_cast<const float4*>(device + 1024 * kMiB), reinterpret_cast<float4*>(device + 1536 * kMiB),
              512 * kMiB / 16, 40);
        CHECK(cudaGetLastError());
        beside.push_back(copy_gbps(to_device, copy_bytes * (1 + i)));
        CHECK(cudaStreamSynchronize(compute_stream));
      }
      std::printf("%s 256 MiB beside a %s kernel: %.1f GB/s\n", name, kind == 0 ? "compute-bound" : "memory-bound",
                  median(beside));
    }
  }

  {  // 4. Host threads busy writing memory.
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::vector<unsigned>> scratch(n, std::vector<unsigned>(16 << 20));
    for (unsigned t = 0; t < n; ++t)
      threads.emplace_back([&, t] {
        unsigned x = t + 1;
        while (!stop.load(std::memory_order_relaxed))
          for (unsigned& v : scratch[t]) v = (x = x * 1664525u + 1013904223u);
      });
    for (int to_device = 1; to_device >= 0; --to_device) {
      std::vector<double> busy;
      for (int i = 0; i < 5; ++i) busy.push_back(copy_gbps(to_device, copy_bytes * (1 + i)));
      std::printf("%s 256 MiB while %u host threads write memory: %.1f GB/s\n", to_device ? "h2d" : "d2h", n,
                  median(busy));
    }
    stop = true;
    for (auto& t : threads) t.join();
  }

  // 5. The compute stream's small copies while a 1 GiB d2h runs on the copy stream.
  float* loss_host = nullptr;
  float* loss_mapped = nullptr;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&loss_host), 4096, cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&loss_mapped), loss_host, 0));
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<double> waited, big;
    for (int i = 0; i < 3; ++i) {
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaEventRecord(c, copy_stream));
      CHECK(cudaMemcpyAsync(host, device, 1024 * kMiB, cudaMemcpyDeviceToHost, copy_stream));
      CHECK(cudaEventRecord(d, copy_stream));
      CHECK(cudaStreamWaitEvent(compute_stream, c));  // starts with the big copy
      CHECK(cudaEventRecord(a, compute_stream));
      if (kind == 0)
        CHECK(cudaMemcpyAsync(loss_host, device, 4, cudaMemcpyDeviceToHost, compute_stream));
      else if (kind == 1)
        CHECK(cudaMemcpyAsync(device + 1024 * kMiB, device + 1536 * kMiB, 64 * kMiB, cudaMemcpyDeviceToDevice,
                              compute_stream));
      else
        store_kernel<<<1, 1, 0, compute_stream>>>(reinterpret_cast<const float*>(device), loss_mapped);
      CHECK(cudaEventRecord(b, compute_stream));
      waited.push_back(elapsed(a, b));
      big.push_back(elapsed(c, d));
    }
    const char* what[] = {"4-byte d2h cudaMemcpyAsync", "64 MiB d2d cudaMemcpyAsync", "4-byte kernel store to mapped memory"};
    std::printf("compute stream's %s beside a 1 GiB d2h (%.2f ms): %.3f ms\n", what[kind], median(big), median(waited));
  }
  return 0;
}
