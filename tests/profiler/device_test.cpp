// Device files: every shipped one loads; names and paths are accepted; bad
// files say where and what.

#include "profiler/device.h"

#include <gtest/gtest.h>

#include "profiler/analytic_model.h"

namespace mplan {
namespace {

TEST(Device, EveryShippedDeviceLoads) {
  const std::vector<std::string> names = available_devices();
  for (const char* wanted : {"k40", "titanx", "p100", "v100", "v100-32gb", "a100-40gb", "a100-80gb", "h100", "k80",
                             "titanblack", "p100-sxm2", "gtx1080ti", "titanv", "m40", "t4", "v100-pcie",
                             "a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie", "rtx4090", "l4", "gtx1080", "titanx-pascal", "quadro-rtx8000",
                             "rtx6000-ada", "quadro-rtx6000", "rtx2080ti", "v100-sxm3"})
    EXPECT_NE(std::find(names.begin(), names.end(), wanted), names.end()) << wanted;
  for (const std::string& name : names) {
    Result<Device> device = load_device(name);
    ASSERT_TRUE(device.ok()) << device.error().to_string();
    EXPECT_EQ(device->name, name);
    EXPECT_GT(device->peak_fp32_flops, 1e12);
    EXPECT_GT(device->memory_bandwidth_bytes_per_s, 1e11);
    EXPECT_GT(device->host_to_device_bytes_per_s, 1e9);
    EXPECT_GE(device->memory_bytes, int64_t{6} << 30);
    // Every shipped device names a shipped architecture table and loads it.
    EXPECT_EQ(device->arch.name, device->architecture);
    EXPECT_FALSE(device->arch.source_file.empty());
    EXPECT_TRUE(device->has_math(MathMode::fp32));
    EXPECT_TRUE(device->has_math(device->default_math));
  }
  Result<Device> k40 = load_device("k40");
  EXPECT_DOUBLE_EQ(k40->peak_fp32_flops, 4.29e12);
  EXPECT_EQ(k40->memory_bytes, int64_t{12} << 30);
  EXPECT_EQ(k40->sm_count, 15);
  EXPECT_DOUBLE_EQ(k40->launch_latency_ms, 0.005);
  // Turing has FP16 tensor cores and no TF32: FP32 by default; Ada TF32 by default.
  Result<Device> t4 = load_device("t4");
  ASSERT_TRUE(t4.ok()) << t4.error().to_string();
  EXPECT_EQ(t4->arch.name, "turing");
  EXPECT_EQ(t4->default_math, MathMode::fp32);
  EXPECT_TRUE(t4->has_math(MathMode::fp16));
  EXPECT_FALSE(t4->has_math(MathMode::tf32));
  Result<Device> rtx4090 = load_device("rtx4090");
  ASSERT_TRUE(rtx4090.ok()) << rtx4090.error().to_string();
  EXPECT_EQ(rtx4090->arch.name, "ada");
  EXPECT_EQ(rtx4090->default_math, MathMode::tf32);
}

TEST(Device, PathOrName) {
  Result<Device> by_path = load_device(devices_dir() + "/p100.yaml");
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path->name, "p100");
  Result<Device> unknown = load_device("gtx480");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("k40"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("h100"), std::string::npos);
}

TEST(Device, BadFilesSayWhereAndWhat) {
  const std::string good =
      "name: x\npeak_fp32_tflops: 1\nmemory_bandwidth_gb_per_s: 100\nmemory: 4GiB\nsm_count: 4\n"
      "host_to_device_gb_per_s: 10\ndevice_to_host_gb_per_s: 10\ncopy_engines: 2\nlaunch_latency_us: 5\n"
      "copy_latency_us: 10\narchitecture: kepler\n";
  ASSERT_TRUE(parse_device(good, "x.yaml").ok());
  Result<Device> missing = parse_device("name: x\n", "x.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing 'peak_fp32_tflops'"), std::string::npos);
  std::string bad = good;
  bad.replace(bad.find("peak_fp32_tflops: 1"), 19, "peak_fp32_tflops: lots");
  Result<Device> not_number = parse_device(bad, "x.yaml");
  ASSERT_FALSE(not_number.ok());
  EXPECT_EQ(not_number.error().to_string(), "x.yaml:2:19: 'peak_fp32_tflops': expected a number");
  Result<Device> typo = parse_device(good + "memroy_gb: 3\n", "x.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().message.find("unknown key 'memroy_gb'"), std::string::npos);
  std::string engines = good;
  engines.replace(engines.find("copy_engines: 2"), 15, "copy_engines: 3");
  EXPECT_FALSE(parse_device(engines, "x.yaml").ok());
  // The copies' slowdown both ways at once: optional, 1 by default, in 1..100.
  EXPECT_EQ(parse_device(good, "x.yaml")->copy_duplex_slowdown, 1.0);
  Result<Device> duplex = parse_device(good + "copy_duplex_slowdown: 1.4\n", "x.yaml");
  ASSERT_TRUE(duplex.ok()) << duplex.error().to_string();
  EXPECT_EQ(duplex->copy_duplex_slowdown, 1.4);
  EXPECT_EQ(AnalyticCostModel(*duplex).duplex_slowdown(), 1.4);
  for (const char* bad : {"0.5", "0", "101", ".nan", "fast"}) {
    Result<Device> refused = parse_device(good + "copy_duplex_slowdown: " + bad + "\n", "x.yaml");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().to_string(),
              std::string("x.yaml:12:23: 'copy_duplex_slowdown': expected 1 to 100 (how much slower a copy runs while "
                          "the other direction copies), got ") + bad);
  }
  EXPECT_EQ(parse_device(good + "copy_duplex_slowdown: 100\n", "x.yaml")->copy_duplex_slowdown, 100.0);
  std::string one_engine = good;
  one_engine.replace(one_engine.find("copy_engines: 2"), 15, "copy_engines: 1");
  Result<Device> shared = parse_device(one_engine + "copy_duplex_slowdown: 1.4\n", "x.yaml");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().message.find("needs copy_engines: 2"), std::string::npos) << shared.error().message;
}

TEST(Device, ArchitectureAndMathModes) {
  Result<Device> k40 = load_device("k40");
  ASSERT_TRUE(k40.ok());
  EXPECT_EQ(k40->architecture, "kepler");
  EXPECT_EQ(k40->default_math, MathMode::fp32);
  EXPECT_FALSE(k40->has_math(MathMode::tf32));
  Result<Device> a100 = load_device("a100-80gb");
  ASSERT_TRUE(a100.ok());
  EXPECT_EQ(a100->architecture, "ampere");
  EXPECT_EQ(a100->default_math, MathMode::tf32);  // cuDNN's default math on FP32 data on Ampere
  EXPECT_DOUBLE_EQ(a100->peak_flops(MathMode::tf32), 156e12);
  EXPECT_DOUBLE_EQ(a100->peak_flops(MathMode::bf16), 312e12);
  Result<Device> v100 = load_device("v100");
  ASSERT_TRUE(v100.ok());
  EXPECT_EQ(v100->default_math, MathMode::fp32);  // Volta has no TF32
  EXPECT_TRUE(v100->has_math(MathMode::fp16));
  EXPECT_FALSE(v100->has_math(MathMode::bf16));
}

TEST(Device, BadArchitecturesAndMathModesSayWhat) {
  const std::string good =
      "name: x\npeak_fp32_tflops: 1\nmemory_bandwidth_gb_per_s: 100\nmemory: 4GiB\nsm_count: 4\n"
      "host_to_device_gb_per_s: 10\ndevice_to_host_gb_per_s: 10\ncopy_engines: 2\nlaunch_latency_us: 5\n"
      "copy_latency_us: 10\n";
  Result<Device> no_arch = parse_device(good, "x.yaml");
  ASSERT_FALSE(no_arch.ok());
  EXPECT_NE(no_arch.error().message.find("missing 'architecture'"), std::string::npos);
  Result<Device> unknown = parse_device(good + "architecture: fermi\n", "x.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown architecture 'fermi'"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("kepler"), std::string::npos);  // lists the known ones
  EXPECT_EQ(unknown.error().where.line, 11);
  // A listed mode needs its peak; a peak needs its mode; the table needs the mode's efficiency.
  Result<Device> no_peak = parse_device(good + "architecture: ampere\nmath_modes: [fp32, tf32]\n", "x.yaml");
  ASSERT_FALSE(no_peak.ok());
  EXPECT_NE(no_peak.error().message.find("'peak_tf32_tflops' is missing"), std::string::npos);
  Result<Device> stray = parse_device(good + "architecture: ampere\npeak_tf32_tflops: 100\n", "x.yaml");
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.error().message.find("does not list tf32"), std::string::npos);
  Result<Device> kepler_tf32 =
      parse_device(good + "architecture: kepler\nmath_modes: [fp32, tf32]\npeak_tf32_tflops: 8\n", "x.yaml");
  ASSERT_FALSE(kepler_tf32.ok());
  EXPECT_NE(kepler_tf32.error().message.find("no tensor-core efficiency for tf32"), std::string::npos);
  Result<Device> bad_mode = parse_device(good + "architecture: ampere\nmath_modes: [fp32, fp8]\n", "x.yaml");
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.error().message.find("unknown mode 'fp8'"), std::string::npos);
  Result<Device> no_fp32 = parse_device(good + "architecture: ampere\nmath_modes: [tf32]\npeak_tf32_tflops: 9\n", "x.yaml");
  ASSERT_FALSE(no_fp32.ok());
  Result<Device> bad_default =
      parse_device(good + "architecture: kepler\ndefault_math_mode: tf32\n", "x.yaml");
  ASSERT_FALSE(bad_default.ok());
  EXPECT_NE(bad_default.error().message.find("'default_math_mode'"), std::string::npos);
}

}  // namespace
}  // namespace mplan
