#pragma once
// Helpers of the GPU tests: skipping where there is no GPU, device buffers,
// random data, and the comparison with the CPU backend's kernels
// (relative difference of the whole tensor, fp32, TF32 off: <= 1e-4).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/ops.h"

namespace mplan::gpu_test {

// Why no GPU test can run here; "" when cudaGetDeviceCount finds a GPU.
inline const std::string& no_gpu_reason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
    }
    return count == 0 ? std::string("cudaGetDeviceCount found no GPU") : std::string();
  }();
  return reason;
}

// First statement of a test that needs a GPU: skips it, saying why, where there is none.
#define MPLAN_REQUIRE_GPU()                                                                              \
  do {                                                                                                   \
    if (!::mplan::gpu_test::no_gpu_reason().empty())                                                     \
      GTEST_SKIP() << "no GPU on this machine (" << ::mplan::gpu_test::no_gpu_reason()                   \
                   << "): the CUDA backend is compiled and linked, its numerics are checked where a GPU is"; \
  } while (0)

inline constexpr double kTolerance = 1e-4;

inline std::vector<float> random_floats(size_t count, uint32_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(random);
  return values;
}

// One device allocation per buffer (tests are not budgeted), freed at the end of scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    std::string error;
    memory_ = rt::device_alloc(bytes, &error);
    if (memory_.base == nullptr) ADD_FAILURE() << error;
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (memory_.base != nullptr && !host.empty())
      rt::copy_to_device(memory_.base, host.data(), host.size() * sizeof(T));
  }
  ~DeviceBuffer() { rt::device_free(memory_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* f32() const { return reinterpret_cast<float*>(memory_.base); }
  int32_t* i32() const { return reinterpret_cast<int32_t*>(memory_.base); }
  uint8_t* u8() const { return reinterpret_cast<uint8_t*>(memory_.base); }
  void* bytes() const { return memory_.base; }

  template <typename T = float>
  std::vector<T> download(size_t count) const {
    std::vector<T> host(count);
    if (count > 0) rt::copy_to_host(host.data(), memory_.base, count * sizeof(T));
    return host;
  }

 private:
  rt::DeviceMemory memory_;
};

// max |gpu - cpu| / max |cpu| <= tolerance (the tensor's relative difference),
// both finite, same length; the message names the worst element.
// `min_scale`: the size of the terms a result is computed from, where they
// cancel (batch norm's dx over a channel of one value is 0 in exact
// arithmetic, and each backend leaves its own rounding of k*dy there).
inline ::testing::AssertionResult close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                        double tolerance = kTolerance, double min_scale = 0.0) {
  if (gpu.size() != cpu.size())
    return ::testing::AssertionFailure() << "sizes differ: " << gpu.size() << " vs " << cpu.size();
  double scale = min_scale, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!std::isfinite(gpu[i]) || !std::isfinite(cpu[i]))
      return ::testing::AssertionFailure() << "element " << i << " not finite: gpu " << gpu[i] << ", cpu " << cpu[i];
    scale = std::max(scale, std::fabs(static_cast<double>(cpu[i])));
    const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
    if (diff > worst) {
      worst = diff;
      worst_at = i;
    }
  }
  const double relative = scale > 0 ? worst / scale : worst;
  if (relative <= tolerance) return ::testing::AssertionSuccess() << "TENSOR OK, max diff " << worst;
  return ::testing::AssertionFailure() << "relative difference " << relative << " > " << tolerance << " at element "
                                       << worst_at << ": gpu " << gpu[worst_at] << ", cpu " << cpu[worst_at];
}

}  // namespace mplan::gpu_test
