#pragma once
// Streams and events of the CPU backend, with CUDA's semantics.
//
// A Stream is a thread running a FIFO of closures, one after another, in the
// order they were enqueued (a cudaStream_t). An Event marks a point in a stream:
// event_record() enqueues the mark; stream_wait_event() makes a stream wait,
// before anything enqueued after the wait, until the most recent record of the
// event (as of the call) has run; event_synchronize() makes the host wait for it;
// event_query() asks without waiting. As in CUDA, waiting on an event never
// recorded returns at once.
//
// Copies really run on their own threads (copy streams h2d and d2h, or one
// shared copy stream, per the plan; moDNN §IV-A uses one copy stream, current
// GPUs have one copy engine per direction), concurrently with the compute
// stream, so a wait missing from a generated schedule is a real data race.
//
// The generated program enqueues every op with launch(stream, closure); the ops
// themselves (runtime/ops.h) are plain synchronous functions.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace mplan::rt {

class Stream {
 public:
  explicit Stream(std::string name);
  // Runs everything already enqueued, then stops the thread.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Appends a closure to the FIFO; it runs after every earlier one.
  void enqueue(std::function<void()> work);
  // Blocks the calling thread until everything enqueued so far has run.
  void synchronize();
  const std::string& name() const { return name_; }

 private:
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;  // closures ever enqueued
  uint64_t finished_ = 0;  // closures that have finished running
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// A cudaEvent_t. Copies share one state, so an Event can be captured by value.
class Event {
 public:
  Event();
  struct State;

 private:
  friend void event_record(Event& event, Stream& stream);
  friend void stream_wait_event(Stream& stream, const Event& event);
  friend bool event_query(const Event& event);
  friend void event_synchronize(const Event& event);
  std::shared_ptr<State> state_;
};

// Enqueues the event's mark on the stream (cudaEventRecord).
void event_record(Event& event, Stream& stream);
// Work enqueued on stream after this call waits until the event's latest
// record, as of this call, has run (cudaStreamWaitEvent).
void stream_wait_event(Stream& stream, const Event& event);
// Whether the event's latest record has run (cudaEventQuery == cudaSuccess).
bool event_query(const Event& event);
// Blocks the host until the event's latest record has run (cudaEventSynchronize).
void event_synchronize(const Event& event);

// Enqueues a closure (an op call) on the stream.
inline void launch(Stream& stream, std::function<void()> work) { stream.enqueue(std::move(work)); }
// Enqueues a memcpy of bytes from src to dst (host buffer ↔ arena) on the stream
// (cudaMemcpyAsync). The pointers must stay valid until it has run.
void copy_async(void* dst, const void* src, size_t bytes, Stream& stream);
// Blocks the host until the stream is idle (cudaStreamSynchronize).
inline void stream_synchronize(Stream& stream) { stream.synchronize(); }

}  // namespace mplan::rt
