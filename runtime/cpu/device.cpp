// The CPU backend of runtime/device.h: thread streams with CUDA's semantics,
// aligned host memory standing in for the device, memcpy copies.

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/check.h"
#include "runtime/cpu/stream.h"

namespace mplan::rt {

Stream::Stream(std::string stream_name) : name(std::move(stream_name)), thread_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Stream::enqueue(std::function<void()> work) {
  MPLAN_RT_CHECK(work != nullptr, "empty closure enqueued on a stream");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MPLAN_RT_CHECK(!stopping_, "closure enqueued on a stream being destroyed");
    queue_.push_back(std::move(work));
    ++enqueued_;
  }
  changed_.notify_all();
}

void Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return finished_ >= target; });
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++finished_;
    changed_.notify_all();
  }
}

Stream* stream_create(const char* name) { return new Stream(name == nullptr ? "stream" : name); }
void stream_destroy(Stream* stream) { delete stream; }
void stream_synchronize(Stream* stream) { stream->synchronize(); }

Event* event_create() { return new Event(); }
void event_destroy(Event* event) { delete event; }

void event_record(Event* event, Stream* stream) {
  uint64_t number;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    number = ++event->recorded;
  }
  stream->enqueue([event, number] {
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      if (number > event->completed) {
        event->completed = number;
        event->completed_at = std::chrono::steady_clock::now();
      }
    }
    event->changed.notify_all();
  });
}

void stream_wait_event(Stream* stream, Event* event) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    target = event->recorded;
  }
  if (target == 0) return;  // never recorded: nothing to wait for (as in CUDA)
  stream->enqueue([event, target] {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->changed.wait(lock, [&] { return event->completed >= target; });
  });
}

bool event_query(Event* event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->completed >= event->recorded;
}

void event_synchronize(Event* event) {
  std::unique_lock<std::mutex> lock(event->mutex);
  const uint64_t target = event->recorded;
  event->changed.wait(lock, [&] { return event->completed >= target; });
}

float event_elapsed_ms(Event* start, Event* end) {
  std::chrono::steady_clock::time_point a, b;
  {
    std::lock_guard<std::mutex> lock(start->mutex);
    MPLAN_RT_CHECK(start->recorded > 0 && start->completed >= start->recorded, "event_elapsed_ms: start not complete");
    a = start->completed_at;
  }
  {
    std::lock_guard<std::mutex> lock(end->mutex);
    MPLAN_RT_CHECK(end->recorded > 0 && end->completed >= end->recorded, "event_elapsed_ms: end not complete");
    b = end->completed_at;
  }
  return std::chrono::duration<float, std::milli>(b - a).count();
}

namespace {

size_t round_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

std::byte* aligned_bytes(size_t size_bytes) {
  const size_t rounded = round_up(size_bytes == 0 ? 1 : size_bytes, kDeviceAlignmentBytes);
  return static_cast<std::byte*>(std::aligned_alloc(kDeviceAlignmentBytes, rounded));
}

}  // namespace

DeviceMemory device_alloc(size_t size_bytes, std::string* error) {
  DeviceMemory memory;
  memory.size_bytes = round_up(size_bytes, kDeviceAlignmentBytes);
  memory.base = aligned_bytes(memory.size_bytes);
  if (memory.base == nullptr) {
    if (error) *error = "cannot allocate " + std::to_string(memory.size_bytes) + " bytes of (host) memory";
    return DeviceMemory{};
  }
  return memory;
}

void device_free(DeviceMemory& memory) {
  std::free(memory.base);
  memory = DeviceMemory{};
}

HostMemory host_alloc(size_t size_bytes, std::string* error) {
  HostMemory memory;
  memory.size_bytes = size_bytes;
  memory.base = aligned_bytes(size_bytes);
  if (memory.base == nullptr) {
    if (error) *error = "cannot allocate " + std::to_string(size_bytes) + " bytes of host memory";
    return HostMemory{};
  }
  return memory;
}

void host_free(HostMemory& memory) {
  std::free(memory.base);
  memory = HostMemory{};
}

void copy_to_device_async(void* device_dst, const void* host_src, size_t bytes, Stream* stream) {
  stream->enqueue([device_dst, host_src, bytes] { std::memcpy(device_dst, host_src, bytes); });
}

void copy_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream) {
  stream->enqueue([host_dst, device_src, bytes] { std::memcpy(host_dst, device_src, bytes); });
}

void copy_on_device_async(void* device_dst, const void* device_src, size_t bytes, Stream* stream) {
  auto copy = [device_dst, device_src, bytes] { std::memcpy(device_dst, device_src, bytes); };
  if (stream == nullptr) copy();
  else stream->enqueue(copy);
}

void store_to_host_async(void* host_dst, const void* device_src, size_t bytes, Stream* stream) {
  copy_to_host_async(host_dst, device_src, bytes, stream);  // one memory: a copy is a store
}

void fill_u32_async(void* device_dst, uint32_t pattern, size_t bytes, Stream* stream) {
  auto fill = [device_dst, pattern, bytes] {
    auto* out = static_cast<unsigned char*>(device_dst);
    const size_t words = bytes / 4;
    for (size_t i = 0; i < words; ++i) std::memcpy(out + 4 * i, &pattern, 4);
    std::memset(out + 4 * words, static_cast<int>(pattern & 0xff), bytes - 4 * words);
  };
  if (stream == nullptr) {
    fill();
  } else {
    stream->enqueue(fill);
  }
}

void stream_sleep_async(Stream* stream, int ms) {
  stream->enqueue([ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) { std::memcpy(device_dst, host_src, bytes); }
void copy_to_host(void* host_dst, const void* device_src, size_t bytes) { std::memcpy(host_dst, device_src, bytes); }

namespace {
std::string& current_math_mode() {
  static std::string mode = "fp32";
  return mode;
}
}  // namespace

bool set_math_mode(const std::string& mode, std::string* error) {
  // A 16-bit program's float kernels compute in fp32 between its casts.
  if (mode != "fp32" && mode != "bf16" && mode != "fp16") {
    if (error) *error = "the CPU backend computes in fp32 (and bf16 or fp16 through casts) only, not " + mode;
    return false;
  }
  current_math_mode() = mode;
  return true;
}

const std::string& math_mode() { return current_math_mode(); }

BackendInfo backend_info() {
  BackendInfo info;
  info.backend = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      info.device = line.substr(line.find(':') + 2);
      break;
    }
  if (info.device.empty()) info.device = "cpu";
  info.libraries = "OpenBLAS";
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %lld kB", &kib) == 1) info.memory_bytes = kib * 1024;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) info.free_memory_bytes = kib * 1024;
  }
  return info;
}

}  // namespace mplan::rt
