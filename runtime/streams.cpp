#include "runtime/streams.h"

#include <cstring>

#include "runtime/check.h"

namespace mplan::rt {

Stream::Stream(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}

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
  uint64_t target = enqueued_;
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

// recorded: how many records were issued (host order); completed: the highest
// record number whose mark has run on its stream.
struct Event::State {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0;
  uint64_t completed = 0;

  void wait_for(uint64_t target) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return completed >= target; });
  }
  uint64_t latest() {
    std::lock_guard<std::mutex> lock(mutex);
    return recorded;
  }
};

Event::Event() : state_(std::make_shared<State>()) {}

void event_record(Event& event, Stream& stream) {
  std::shared_ptr<Event::State> state = event.state_;
  uint64_t number;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    number = ++state->recorded;
  }
  stream.enqueue([state, number] {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (number > state->completed) state->completed = number;
    }
    state->changed.notify_all();
  });
}

void stream_wait_event(Stream& stream, const Event& event) {
  std::shared_ptr<Event::State> state = event.state_;
  uint64_t target = state->latest();
  if (target == 0) return;  // never recorded: nothing to wait for (as in CUDA)
  stream.enqueue([state, target] { state->wait_for(target); });
}

bool event_query(const Event& event) {
  std::lock_guard<std::mutex> lock(event.state_->mutex);
  return event.state_->completed >= event.state_->recorded;
}

void event_synchronize(const Event& event) {
  event.state_->wait_for(event.state_->latest());
}

void copy_async(void* dst, const void* src, size_t bytes, Stream& stream) {
  stream.enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

}  // namespace mplan::rt
