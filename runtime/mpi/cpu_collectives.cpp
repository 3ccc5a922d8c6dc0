// The CPU backend's collectives (runtime/collectives.h) over MPI.
//
// A bucket's sum over the ranks, in a fixed order so that every rank holds
// the same bits: the bucket's floats (its dW ranges, packed) are cut into one
// slice per rank; rank q receives every rank's copy of slice q, adds them in
// rank order 0, 1, ..., N-1 in float (((g0 + g1) + g2) + ...), and sends the
// sum to every rank (a reduce-scatter, then an allgather, each of point-to-
// point messages, so that a timeout can name the ranks that did not send).
// It runs on a stream of its own (a thread, runtime/cpu/stream.h), after the
// compute stream's mark of the bucket's ready step; the update waits for it.

#include <cstring>
#include <vector>

#include "runtime/check.h"
#include "runtime/collectives.h"
#include "runtime/cpu/stream.h"
#include "runtime/mpi/mpi_world.h"
#include "runtime/program.h"

namespace mplan::rt {
namespace {

constexpr int kSliceTag = 21;
constexpr int kSumTag = 22;

class CpuCollectives final : public MpiHostCollectives {
 public:
  explicit CpuCollectives(std::unique_ptr<MpiWorld> world) : MpiHostCollectives(std::move(world)) {}
  ~CpuCollectives() override {
    if (stream_ != nullptr) {
      stream_synchronize(stream_);
      for (Event* e : ready_) event_destroy(e);
      event_destroy(done_);
      stream_destroy(stream_);
    }
  }


  void bind(const DataParallelSpec& spec, std::byte* device_base, Stream* compute) override {
    MPLAN_RT_CHECK(stream_ == nullptr, "collectives bound twice");
    spec_ = &spec;
    base_ = device_base;
    compute_ = compute;
    stream_ = stream_create("gradients");
    done_ = event_create();
    for (int32_t k = 0; k < spec.bucket_count; ++k) ready_.push_back(event_create());
  }

  void start_bucket(int32_t bucket) override {
    MPLAN_RT_CHECK(bucket >= 0 && bucket < spec_->bucket_count, "start_bucket: no such bucket");
    event_record(ready_[bucket], compute_);
    stream_wait_event(stream_, ready_[bucket]);
    stream_->enqueue([this, bucket] { sum_bucket(bucket); });
  }

  void wait_buckets() override {
    event_record(done_, stream_);
    stream_wait_event(compute_, done_);
  }

  // The gradient stream bounds its own waits (MpiWorld::wait).
  void finish_step() override { stream_synchronize(stream_); }

  void finalize() override {
    if (stream_ != nullptr) stream_synchronize(stream_);
    world_->finalize();
  }

 private:
  void sum_bucket(int32_t bucket) {
    const GradientBucketSpec& b = spec_->buckets[bucket];
    const int n = world_->ranks(), me = world_->rank();
    int64_t floats = 0;
    for (int32_t i = 0; i < b.region_count; ++i) floats += b.regions[i].bytes / 4;
    packed_.resize(static_cast<size_t>(floats));
    int64_t at = 0;
    for (int32_t i = 0; i < b.region_count; ++i) {
      std::memcpy(packed_.data() + at, base_ + b.regions[i].offset, static_cast<size_t>(b.regions[i].bytes));
      at += b.regions[i].bytes / 4;
    }
    auto slice_begin = [&](int q) { return floats * q / n; };
    auto slice_size = [&](int q) { return static_cast<int>(slice_begin(q + 1) - slice_begin(q)); };
    const std::string what = "the sum of gradient bucket " + std::to_string(bucket) + " over the ranks";
    // Every rank's copy of this rank's slice.
    const int mine = slice_size(me);
    received_.assign(static_cast<size_t>(n) * static_cast<size_t>(mine), 0.0f);
    std::vector<MPI_Request> requests;
    std::vector<int> peers;
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      requests.emplace_back();
      MPI_Irecv(received_.data() + static_cast<size_t>(q) * mine, mine, MPI_FLOAT, q, kSliceTag,
                world_->gradient_comm(), &requests.back());
      peers.push_back(q);
      requests.emplace_back();
      MPI_Isend(packed_.data() + slice_begin(q), slice_size(q), MPI_FLOAT, q, kSliceTag, world_->gradient_comm(),
                &requests.back());
      peers.push_back(q);
    }
    world_->wait(requests, peers, what);
    std::memcpy(received_.data() + static_cast<size_t>(me) * mine, packed_.data() + slice_begin(me),
                static_cast<size_t>(mine) * 4);
    // The sum in rank order: ((g0 + g1) + g2) + ...
    float* sum = packed_.data() + slice_begin(me);
    for (int i = 0; i < mine; ++i) {
      float s = received_[static_cast<size_t>(i)];
      for (int q = 1; q < n; ++q) s += received_[static_cast<size_t>(q) * mine + i];
      sum[i] = s;
    }
    // Every rank's sum of its slice.
    requests.clear();
    peers.clear();
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      requests.emplace_back();
      MPI_Irecv(packed_.data() + slice_begin(q), slice_size(q), MPI_FLOAT, q, kSumTag, world_->gradient_comm(),
                &requests.back());
      peers.push_back(q);
      requests.emplace_back();
      MPI_Isend(sum, mine, MPI_FLOAT, q, kSumTag, world_->gradient_comm(), &requests.back());
      peers.push_back(q);
    }
    world_->wait(requests, peers, what);
    at = 0;
    for (int32_t i = 0; i < b.region_count; ++i) {
      std::memcpy(base_ + b.regions[i].offset, packed_.data() + at, static_cast<size_t>(b.regions[i].bytes));
      at += b.regions[i].bytes / 4;
    }
  }

  const DataParallelSpec* spec_ = nullptr;
  std::byte* base_ = nullptr;
  Stream* compute_ = nullptr;
  Stream* stream_ = nullptr;
  std::vector<Event*> ready_;
  Event* done_ = nullptr;
  std::vector<float> packed_, received_;  // used by the gradient stream only
};

}  // namespace

std::unique_ptr<Collectives> make_collectives(int* argc, char*** argv, std::string* error) {
  std::unique_ptr<MpiWorld> world = MpiWorld::start(argc, argv, error);
  if (world == nullptr) return nullptr;
  return std::make_unique<CpuCollectives>(std::move(world));
}

}  // namespace mplan::rt
