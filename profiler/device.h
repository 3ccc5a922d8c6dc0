#pragma once
// A GPU as the analytic cost model sees it (docs/device-format.md): the few
// public figures that bound how fast kernels and copies can run. Device files
// live in examples/devices/<name>.yaml, each figure with its source.

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "profiler/arch_efficiency.h"
#include "profiler/math_mode.h"

namespace mplan {

struct Device {
  std::string name;              // "k40", the file's stem
  std::string description;       // "NVIDIA Tesla K40 (Kepler GK110B)"
  std::string source_file;       // where it was read from ("" if built in code)
  double peak_fp32_flops = 0;    // FLOP/s, FP32 without tensor cores
  double memory_bandwidth_bytes_per_s = 0;
  int64_t memory_bytes = 0;
  int sm_count = 1;              // streaming multiprocessors: how much work fills the GPU
  double host_to_device_bytes_per_s = 0;  // pinned memory, one direction at a time
  double device_to_host_bytes_per_s = 0;
  int copy_engines = 1;          // 1: copies in both directions share one engine
  // How much slower a copy runs while the other direction copies too (two
  // engines; 1: full duplex). Optional in the file (copy_duplex_slowdown).
  double copy_duplex_slowdown = 1.0;
  // Fixed cost of one kernel launch, host and device together; the
  // architecture table's kernel_gap_us of it is the device's (kernel_work.h).
  double launch_latency_ms = 0;
  double copy_latency_ms = 0;    // fixed cost of one cudaMemcpyAsync
  // The architecture's efficiency table (examples/devices/architectures/<name>.yaml).
  // A Device built in code gets the built-in (Maxwell) table.
  std::string architecture = "maxwell";
  ArchEfficiency arch;
  // Math modes the GPU has (fp32 always; tf32, fp16, bf16 on tensor cores) and
  // their dense tensor-core peaks in FLOP/s (0 where the mode is absent).
  std::vector<MathMode> math_modes = {MathMode::fp32};
  double peak_tf32_flops = 0, peak_fp16_flops = 0, peak_bf16_flops = 0;
  // The mode convolutions run in when the model does not say: tf32 where the
  // GPU has it (cuDNN's CUDNN_DEFAULT_MATH on FP32 data, PyTorch's default for
  // convolutions), fp32 otherwise.
  MathMode default_math = MathMode::fp32;

  bool has_math(MathMode mode) const;
  double peak_flops(MathMode mode) const;  // fp32: peak_fp32_flops
};

// Parses a device file's text; `file` names it in error messages, which give
// line and column and say what was expected.
Result<Device> parse_device(const std::string& yaml_text, const std::string& file);

// `name_or_path` is tried as a path first, then as a name in the shipped
// device files, <devices_dir()>/<name>.yaml (profiler/install_paths.h). The
// error for an unknown name lists the names there.
Result<Device> load_device(const std::string& name_or_path);

// The folder of the shipped device files and the names in it, sorted.
std::string devices_dir();
std::vector<std::string> available_devices();

}  // namespace mplan
