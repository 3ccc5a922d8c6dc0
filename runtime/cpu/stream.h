#pragma once
// The CPU backend's streams and events (runtime/device.h): a Stream is a
// thread running a FIFO of closures in order, an Event a counter of records
// and completed marks. Copies and ops enqueue closures, so the copy streams
// really run concurrently with the compute stream.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/device.h"

namespace mplan::rt {

struct Stream {
  explicit Stream(std::string name);
  // Runs everything already enqueued, then stops the thread.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Appends a closure; it runs after every earlier one.
  void enqueue(std::function<void()> work);
  // Blocks the caller until everything enqueued so far has run.
  void synchronize();

  std::string name;

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;  // closures ever enqueued
  uint64_t finished_ = 0;  // closures that have finished running
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// recorded: records issued (host order); completed: the highest record number
// whose mark has run; completed_at: when that mark ran (event_elapsed_ms).
struct Event {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0;
  uint64_t completed = 0;
  std::chrono::steady_clock::time_point completed_at{};
};

namespace cpu {
// Runs `work` on the context's stream, or at once when it has none.
inline void launch(const Context& ctx, std::function<void()> work) {
  if (ctx.stream == nullptr) {
    work();
  } else {
    ctx.stream->enqueue(std::move(work));
  }
}
}  // namespace cpu

}  // namespace mplan::rt
