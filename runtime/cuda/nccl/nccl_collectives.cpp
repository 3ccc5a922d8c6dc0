// The CUDA backend's collectives (runtime/collectives.h): NCCL sums the
// gradient buckets on a stream of their own, bootstrapped over MPI
// (runtime/mpi/mpi_world.h), which also carries the host's exchanges.
//
// Each rank uses the GPU of its index among the ranks of its node (modulo
// the GPUs it sees). A bucket's ncclAllReduce (sum, float32, in place; one
// per dW range, grouped) is ordered after an event the compute stream records
// after the bucket's ready step; the update waits for an event after the
// last one. NCCL picks the order of the sum (a ring or a tree, by topology):
// every rank holds the same bits, which need not be the CPU reference's.
//
// The host waits for the buckets by polling that event against the
// collective timeout, checking ncclCommGetAsyncError; past it the
// communicator is aborted (ncclCommAbort) and every rank ends (MPI_Abort).

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "runtime/check.h"
#include "runtime/collectives.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/stream.h"
#include "runtime/mpi/mpi_world.h"
#include "runtime/program.h"

namespace mplan::rt {
namespace {

class NcclCollectives final : public MpiHostCollectives {
 public:
  explicit NcclCollectives(std::unique_ptr<MpiWorld> world) : MpiHostCollectives(std::move(world)) {}
  ~NcclCollectives() override {
    if (stream_ != nullptr) {
      for (cudaEvent_t e : ready_) cudaEventDestroy(e);
      cudaEventDestroy(done_);
      cudaStreamDestroy(stream_);
    }
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  // The rank's GPU, then NCCL's communicator from rank 0's unique id.
  bool connect(std::string* error) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      *error = "rank " + std::to_string(world_->rank()) + " sees no CUDA device";
      return false;
    }
    MPLAN_CUDA_CHECK(cudaSetDevice(world_->local_rank() % devices));
    ncclUniqueId id{};
    if (world_->rank() == 0 && !nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId", error)) return false;
    world_->broadcast(&id, sizeof id, "the broadcast of NCCL's unique id");
    return nccl_ok(ncclCommInitRank(&comm_, world_->ranks(), id, world_->rank()), "ncclCommInitRank", error);
  }


  void bind(const DataParallelSpec& spec, std::byte* device_base, Stream* compute) override {
    MPLAN_RT_CHECK(stream_ == nullptr, "collectives bound twice");
    spec_ = &spec;
    base_ = device_base;
    compute_ = compute->stream;
    MPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MPLAN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    ready_.resize(static_cast<size_t>(spec.bucket_count));
    for (cudaEvent_t& e : ready_) MPLAN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  void start_bucket(int32_t bucket) override {
    MPLAN_RT_CHECK(bucket >= 0 && bucket < spec_->bucket_count, "start_bucket: no such bucket");
    MPLAN_CUDA_CHECK(cudaEventRecord(ready_[bucket], compute_));
    MPLAN_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_[bucket], 0));
    const GradientBucketSpec& b = spec_->buckets[bucket];
    std::string error;
    bool ok = nccl_ok(ncclGroupStart(), "ncclGroupStart", &error);
    for (int32_t i = 0; ok && i < b.region_count; ++i) {
      float* gradients = reinterpret_cast<float*>(base_ + b.regions[i].offset);
      ok = nccl_ok(ncclAllReduce(gradients, gradients, static_cast<size_t>(b.regions[i].bytes / 4), ncclFloat, ncclSum,
                                 comm_, stream_),
                   "ncclAllReduce", &error);
    }
    if (ok) ok = nccl_ok(ncclGroupEnd(), "ncclGroupEnd", &error);
    if (!ok) abort("error: the sum of gradient bucket " + std::to_string(bucket) + ": " + error, 1);
  }

  void wait_buckets() override {
    MPLAN_CUDA_CHECK(cudaEventRecord(done_, stream_));
    MPLAN_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
  }

  void finish_step() override {
    const auto started = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      const cudaError_t status = cudaEventQuery(done_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) MPLAN_CUDA_CHECK(status);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
#if NCCL_VERSION_CODE >= 21400
      if (async == ncclInProgress) async = ncclSuccess;
#endif
      if (async != ncclSuccess) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        abort(std::string("error: NCCL failed summing the gradients: ") + ncclGetErrorString(async), 1);
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (waited > world_->timeout_s()) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", world_->timeout_s());
        abort(std::string("error: the sum of the gradient buckets over the ranks (NCCL) timed out after ") + seconds +
                  " s waiting for another rank (NCCL does not say which; a rank died or hangs; "
                  "--collective-timeout sets the limit)",
              1);
      }
      if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(polls > 4096 ? 1000 : 50));
    }
  }

  void finalize() override {
    if (stream_ != nullptr) MPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    world_->finalize();
  }

 private:
  static bool nccl_ok(ncclResult_t result, const char* call, std::string* error) {
    if (result == ncclSuccess) return true;
    *error = std::string(call) + ": " + ncclGetErrorString(result);
    return false;
  }

  ncclComm_t comm_ = nullptr;
  const DataParallelSpec* spec_ = nullptr;
  std::byte* base_ = nullptr;
  cudaStream_t compute_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> ready_;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

std::unique_ptr<Collectives> make_collectives(int* argc, char*** argv, std::string* error) {
  std::unique_ptr<MpiWorld> world = MpiWorld::start(argc, argv, error);
  if (world == nullptr) return nullptr;
  auto collectives = std::make_unique<NcclCollectives>(std::move(world));
  if (!collectives->connect(error)) return nullptr;
  return collectives;
}

}  // namespace mplan::rt
