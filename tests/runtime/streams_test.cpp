// Streams and events: FIFO order, real cross-stream waits, and real races when a
// wait is missing (copies run on their own threads).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "runtime/cpu/stream.h"
#include "runtime/device.h"
#include "runtime/poison.h"

namespace mplan::rt {
namespace {

using namespace std::chrono_literals;

// A closure on a CPU stream, as an op's launch is (runtime/cpu/stream.h).
void launch(Stream& stream, std::function<void()> work) { stream.enqueue(std::move(work)); }

// Device memory of `bytes`, freed at the end of a test.
struct Memory {
  explicit Memory(size_t bytes) : device(device_alloc(bytes, nullptr)), host(host_alloc(bytes, nullptr)) {}
  ~Memory() {
    device_free(device);
    host_free(host);
  }
  float* f32(size_t offset) const { return reinterpret_cast<float*>(device.base + offset); }
  DeviceMemory device;
  HostMemory host;
};

TEST(Streams, RunClosuresInFifoOrder) {
  Stream stream("compute");
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) launch(stream, [&order, i] { order.push_back(i); });
  stream.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(Streams, RunOnTheirOwnThreads) {
  Stream a("compute"), b("h2d");
  std::thread::id host = std::this_thread::get_id(), ida, idb;
  launch(a, [&] { ida = std::this_thread::get_id(); });
  launch(b, [&] { idb = std::this_thread::get_id(); });
  a.synchronize();
  b.synchronize();
  EXPECT_NE(ida, host);
  EXPECT_NE(idb, host);
  EXPECT_NE(ida, idb);
}

// A producer on the compute stream writes a block slowly; the copy stream offloads
// it to the host after waiting for the producer's event: the host sees the write.
TEST(Streams, WaitMakesTheCopySeeTheEarlierWrite) {
  Memory memory(1024);
  float* block = memory.f32(0);
  for (int i = 0; i < 4; ++i) block[i] = -1.0f;
  Stream compute("compute"), d2h("d2h");
  Event produced;
  launch(compute, [block] {
    std::this_thread::sleep_for(50ms);  // a deliberately slow kernel
    for (int i = 0; i < 4; ++i) block[i] = 7.0f;
  });
  event_record(&produced, &compute);
  stream_wait_event(&d2h, &produced);
  copy_to_host_async(memory.host.base, block, 4 * sizeof(float), &d2h);
  d2h.synchronize();
  float seen[4];
  std::memcpy(seen, memory.host.base, sizeof(seen));
  for (float v : seen) EXPECT_FLOAT_EQ(v, 7.0f);
}

// The same schedule without the wait: the copy does not wait for the producer,
// which is held back until the copy has finished, so the host observes the stale
// value. This is the race a missing wait in a generated program would be.
TEST(Streams, MissingWaitIsARealRace) {
  Memory memory(1024);
  float* block = memory.f32(0);
  for (int i = 0; i < 4; ++i) block[i] = -1.0f;
  Stream compute("compute"), d2h("d2h");
  std::promise<void> release_producer;
  std::shared_future<void> gate = release_producer.get_future().share();
  launch(compute, [block, gate] {
    gate.wait();  // a producer slower than the copy
    for (int i = 0; i < 4; ++i) block[i] = 7.0f;
  });
  Event produced;
  event_record(&produced, &compute);
  // (no stream_wait_event(&d2h, &produced) here)
  copy_to_host_async(memory.host.base, block, 4 * sizeof(float), &d2h);
  d2h.synchronize();  // finishes while the producer is still held back
  EXPECT_FALSE(event_query(&produced));
  release_producer.set_value();
  event_synchronize(&produced);
  EXPECT_TRUE(event_query(&produced));
  float seen[4];
  std::memcpy(seen, memory.host.base, sizeof(seen));
  for (float v : seen) EXPECT_FLOAT_EQ(v, -1.0f);
  EXPECT_FLOAT_EQ(block[0], 7.0f);
}

// Offload then free: compute releases (poisons, in debug mode) a block that the d2h
// stream is copying out. With the wait the host copy is intact; without it the
// host receives poison.
TEST(Streams, PoisonCatchesAFreeBeforeTheOffloadFinishes) {
  for (bool wait : {true, false}) {
    Memory memory(1024);
    float* block = memory.f32(256);
    for (int i = 0; i < 8; ++i) block[i] = 3.0f;
    Stream compute("compute"), d2h("d2h");
    std::promise<void> open;
    std::shared_future<void> gate = open.get_future().share();
    launch(d2h, [gate] { gate.wait(); });  // the copy engine is busy with earlier work
    copy_to_host_async(memory.host.base, block, 8 * sizeof(float), &d2h);
    Event offloaded;
    event_record(&offloaded, &d2h);
    if (wait) stream_wait_event(&compute, &offloaded);
    fill_u32_async(block, kPoisonBits, 8 * sizeof(float), &compute);  // the free, in debug mode
    if (!wait) compute.synchronize();  // the free has happened; the copy has not
    open.set_value();
    d2h.synchronize();
    compute.synchronize();
    const float* copied = reinterpret_cast<const float*>(memory.host.base);
    if (wait) {
      EXPECT_EQ(count_poison(copied, 8), 0u);
      EXPECT_FLOAT_EQ(copied[0], 3.0f);
    } else {
      EXPECT_EQ(count_poison(copied, 8), 8u);
    }
    EXPECT_EQ(count_poison(block, 8), 8u);  // released either way
  }
}

TEST(Events, QueryAndHostSynchronize) {
  Stream stream("compute");
  Event event;
  EXPECT_TRUE(event_query(&event));  // never recorded: complete, as in CUDA
  event_synchronize(&event);         // returns at once
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  std::atomic<bool> ran{false};
  launch(stream, [gate, &ran] {
    gate.wait();
    ran = true;
  });
  event_record(&event, &stream);
  EXPECT_FALSE(event_query(&event));
  open.set_value();
  event_synchronize(&event);
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(event_query(&event));
}

TEST(Events, WaitOnANeverRecordedEventDoesNotBlock) {
  Stream stream("h2d");
  Event never;
  stream_wait_event(&stream, &never);
  std::atomic<bool> ran{false};
  launch(stream, [&ran] { ran = true; });
  stream.synchronize();
  EXPECT_TRUE(ran.load());
}

// A wait binds to the record made before it, not to a later re-record.
TEST(Events, WaitBindsToTheLatestRecordAtTheTimeOfTheWait) {
  Stream a("compute"), b("d2h");
  Event event;
  std::atomic<int> value{0};
  event_record(&event, &a);  // record #1: nothing before it
  a.synchronize();
  stream_wait_event(&b, &event);  // waits for record #1 only
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  launch(a, [gate, &value] {
    gate.wait();
    value = 1;
  });
  event_record(&event, &a);  // record #2, held back by the gate
  std::atomic<int> seen{-1};
  launch(b, [&] { seen = value.load(); });
  b.synchronize();  // must not deadlock waiting for record #2
  EXPECT_EQ(seen.load(), 0);
  open.set_value();
  event_synchronize(&event);
  EXPECT_EQ(value.load(), 1);
}

}  // namespace
}  // namespace mplan::rt
