// The CUDA backend of runtime/device.h: what holds without a GPU (errors are
// values, not aborts; the backend describes itself) and, on a GPU, streams and
// events with CUDA's semantics, fills and copies.

#include <cstring>

#include "runtime/ops.h"
#include "runtime/poison.h"
#include "tests/gpu/gpu_test_util.h"

namespace mplan::gpu_test {
namespace {

TEST(GpuDevice, BackendInfoSaysCudaAndTheMathMode) {
  const rt::BackendInfo info = rt::backend_info();
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_NE(info.libraries.find("cuDNN "), std::string::npos) << info.libraries;
  EXPECT_NE(info.libraries.find("cuBLAS "), std::string::npos) << info.libraries;
  EXPECT_NE(info.libraries.find("TF32 off"), std::string::npos) << info.libraries;
  EXPECT_FALSE(info.runtime.empty());
  if (no_gpu_reason().empty()) {
    EXPECT_GT(info.memory_bytes, 0);
    EXPECT_GT(info.free_memory_bytes, 0);
    EXPECT_EQ(info.device.find("no CUDA device"), std::string::npos) << info.device;
  } else {
    EXPECT_EQ(info.memory_bytes, 0);
    EXPECT_EQ(info.device.rfind("no CUDA device", 0), 0u) << info.device;
  }
}

// Without a GPU cudaMalloc fails for want of a device, with one for want of
// memory: either way an error message, not an abort.
TEST(GpuDevice, DeviceAllocFailureIsAnError) {
  std::string error;
  rt::DeviceMemory memory = rt::device_alloc(size_t{1} << 62, &error);
  EXPECT_EQ(memory.base, nullptr);
  EXPECT_EQ(memory.size_bytes, 0u);
  EXPECT_NE(error.find("cannot allocate"), std::string::npos) << error;
  rt::device_free(memory);  // freeing nothing is fine
}

TEST(GpuDevice, AllocationsAreAlignedAndRounded) {
  MPLAN_REQUIRE_GPU();
  std::string error;
  rt::DeviceMemory memory = rt::device_alloc(1000, &error);
  ASSERT_NE(memory.base, nullptr) << error;
  EXPECT_EQ(memory.size_bytes, 1024u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory.base) % rt::kDeviceAlignmentBytes, 0u);
  rt::device_free(memory);
  rt::HostMemory host = rt::host_alloc(100, &error);
  ASSERT_NE(host.base, nullptr) << error;
  std::memset(host.base, 3, 100);  // pinned host memory is ordinary memory to the host
  rt::host_free(host);
}

// The fill the CPU backend does: words of the pattern, then its low byte,
// also at an address that is not 4-aligned.
TEST(GpuDevice, FillWritesThePatternAsTheCpuDoes) {
  MPLAN_REQUIRE_GPU();
  DeviceBuffer buffer(std::vector<uint8_t>(64, 0));
  rt::fill_u32_async(buffer.u8() + 8, rt::kPoisonBits, 11, nullptr);  // null stream: done on return
  rt::fill_u32_async(buffer.u8() + 33, 0x04030201u, 6, nullptr);
  const std::vector<uint8_t> got = buffer.download<uint8_t>(64);
  std::vector<uint8_t> expected(64, 0);
  const uint32_t poison = rt::kPoisonBits;
  std::memcpy(&expected[8], &poison, 4);
  std::memcpy(&expected[12], &poison, 4);
  std::memset(&expected[16], static_cast<int>(poison & 0xff), 3);
  const uint32_t counting = 0x04030201u;
  std::memcpy(&expected[33], &counting, 4);
  std::memset(&expected[37], 0x01, 2);
  EXPECT_EQ(got, expected);
}

// A wait orders two streams: the copy on `reader` sees what `writer` wrote
// after sleeping, because it waits for the event recorded after the write.
TEST(GpuDevice, EventsOrderStreams) {
  MPLAN_REQUIRE_GPU();
  rt::Stream* writer = rt::stream_create("writer");
  rt::Stream* reader = rt::stream_create("reader");
  rt::Event* written = rt::event_create();
  rt::Event* before = rt::event_create();
  EXPECT_TRUE(rt::event_query(written)) << "an event never recorded counts as done";
  DeviceBuffer buffer(std::vector<uint32_t>(1024, 0));
  rt::HostMemory host = rt::host_alloc(4096, nullptr);
  ASSERT_NE(host.base, nullptr);
  rt::event_record(before, writer);
  rt::stream_sleep_async(writer, 50);
  rt::fill_u32_async(buffer.bytes(), 0xabcdef01u, 4096, writer);
  rt::event_record(written, writer);
  rt::stream_wait_event(reader, written);
  rt::copy_to_host_async(host.base, buffer.bytes(), 4096, reader);
  rt::stream_synchronize(reader);
  EXPECT_TRUE(rt::event_query(written));
  rt::event_synchronize(written);
  EXPECT_GE(rt::event_elapsed_ms(before, written), 0.0f);
  std::vector<uint32_t> words(1024);
  std::memcpy(words.data(), host.base, 4096);
  EXPECT_EQ(words, std::vector<uint32_t>(1024, 0xabcdef01u));
  rt::host_free(host);
  rt::event_destroy(written);
  rt::event_destroy(before);
  rt::stream_destroy(writer);
  rt::stream_destroy(reader);
}

TEST(GpuDevice, AsyncCopiesRoundTripOnAStream) {
  MPLAN_REQUIRE_GPU();
  rt::Stream* stream = rt::stream_create("copy");
  const std::vector<float> values = random_floats(4096, 1);
  rt::HostMemory in = rt::host_alloc(values.size() * sizeof(float), nullptr);
  rt::HostMemory out = rt::host_alloc(values.size() * sizeof(float), nullptr);
  ASSERT_TRUE(in.base != nullptr && out.base != nullptr);
  std::memcpy(in.base, values.data(), in.size_bytes);
  DeviceBuffer buffer(in.size_bytes);
  rt::copy_to_device_async(buffer.bytes(), in.base, in.size_bytes, stream);
  rt::copy_to_host_async(out.base, buffer.bytes(), out.size_bytes, stream);
  rt::stream_synchronize(stream);
  EXPECT_EQ(std::memcmp(in.base, out.base, in.size_bytes), 0);
  rt::host_free(in);
  rt::host_free(out);
  rt::stream_destroy(stream);
}

// A loss read: the compute stream's own store into mapped pinned memory, in
// its order (after the kernel that wrote the value), at any alignment; and a
// device-to-device copy_or_add, which is a kernel too, at odd offsets.
TEST(GpuDevice, StoresToHostAndCopiesInStreamOrder) {
  MPLAN_REQUIRE_GPU();
  rt::Stream* stream = rt::stream_create("compute");
  const std::vector<float> values = random_floats(1027, 2);
  const size_t buffer_bytes = 2 * values.size() * sizeof(float) + 64;
  DeviceBuffer buffer(buffer_bytes);
  rt::HostMemory in = rt::host_alloc(values.size() * sizeof(float), nullptr);
  const size_t range = values.size() * sizeof(float);
  rt::HostMemory out = rt::host_alloc(3 + range + sizeof(float), nullptr);
  ASSERT_TRUE(in.base != nullptr && out.base != nullptr);
  std::memcpy(in.base, values.data(), in.size_bytes);
  rt::fill_u32_async(buffer.bytes(), 0u, buffer_bytes, stream);
  rt::copy_to_device_async(buffer.bytes(), in.base, in.size_bytes, stream);
  rt::Context ctx;
  ctx.stream = stream;
  float* src = static_cast<float*>(buffer.bytes());
  float* dst = src + values.size() + 2;  // 8 bytes off 16-byte alignment: the byte kernel throughout
  rt::copy_or_add(ctx, src, dst, static_cast<int64_t>(values.size()), /*accumulate=*/false);
  rt::store_to_host_async(out.base + 3, dst, range, stream);
  rt::store_to_host_async(out.base + 3 + range, src + 5, sizeof(float), stream);  // a loss read
  rt::stream_synchronize(stream);
  EXPECT_EQ(std::memcmp(out.base + 3, values.data(), range), 0) << "the copied range";
  EXPECT_EQ(std::memcmp(out.base + 3 + range, &values[5], sizeof(float)), 0) << "the 4-byte store";
  rt::host_free(in);
  rt::host_free(out);
  rt::stream_destroy(stream);
}

}  // namespace
}  // namespace mplan::gpu_test
