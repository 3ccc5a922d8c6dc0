// Device files: every shipped one loads; names and paths are accepted; bad
// files say where and what.

#include "profiler/device.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(Device, EveryShippedDeviceLoads) {
  const std::vector<std::string> names = available_devices();
  for (const char* wanted : {"k40", "titanx", "p100", "v100", "v100-32gb", "a100-40gb", "a100-80gb", "h100"})
    EXPECT_NE(std::find(names.begin(), names.end(), wanted), names.end()) << wanted;
  for (const std::string& name : names) {
    Result<Device> device = load_device(name);
    ASSERT_TRUE(device.ok()) << device.error().to_string();
    EXPECT_EQ(device->name, name);
    EXPECT_GT(device->peak_fp32_flops, 1e12);
    EXPECT_GT(device->memory_bandwidth_bytes_per_s, 1e11);
    EXPECT_GT(device->host_to_device_bytes_per_s, 1e9);
    EXPECT_GE(device->memory_bytes, int64_t{12} << 30);
  }
  Result<Device> k40 = load_device("k40");
  EXPECT_DOUBLE_EQ(k40->peak_fp32_flops, 4.29e12);
  EXPECT_EQ(k40->memory_bytes, int64_t{12} << 30);
  EXPECT_EQ(k40->sm_count, 15);
  EXPECT_DOUBLE_EQ(k40->launch_latency_ms, 0.005);
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
      "copy_latency_us: 10\n";
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
}

}  // namespace
}  // namespace mplan
