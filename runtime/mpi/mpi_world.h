#pragma once
// One rank's MPI (runtime/collectives.h): start-up from mpirun's environment,
// the host's exchanges between the ranks, each bounded by the collective
// timeout, and the end of every rank on a failure. Shared by the CPU
// backend's collectives (runtime/mpi/cpu_collectives.cpp) and the CUDA
// backend's NCCL bootstrap (runtime/cuda/nccl/nccl_collectives.cpp).
//
// Every wait is a loop of MPI_Test over non-blocking requests: past the
// deadline it names the ranks whose messages have not arrived, prints
// "train: rank R: <what> timed out after S s waiting for rank(s) ..." and
// calls MPI_Abort, which ends every rank.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives.h"

namespace mplan::rt {

class MpiWorld {
 public:
  // Initialises MPI (MPI_THREAD_SERIALIZED: the ranks' collectives run on
  // one thread at a time, the host's or the gradient stream's). Null with
  // *error when the process was not started by an MPI launcher (a plain
  // ./train) or MPI cannot start.
  static std::unique_ptr<MpiWorld> start(int* argc, char*** argv, std::string* error);
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int32_t rank() const { return rank_; }
  int32_t ranks() const { return ranks_; }
  // The rank's index among the ranks of its node (its GPU on a CUDA node).
  int32_t local_rank() const { return local_rank_; }
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }
  // A communicator of its own for the gradient buckets (their messages never
  // match the host's).
  MPI_Comm gradient_comm() const { return gradient_comm_; }

  // Waits for every request; peers[i] is the rank request i exchanges with.
  // Past the timeout: the message naming the ranks still missing, and MPI_Abort.
  void wait(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const std::string& what);
  // Every rank's `bytes` bytes, in rank order (point to point, so that a
  // timeout can name the ranks that did not send).
  void exchange(const void* mine, size_t bytes, void* all, const char* what);
  // Rank 0's bytes onto every rank.
  void broadcast(void* data, size_t bytes, const char* what);
  // Prints "train: rank R: <message>" on stderr and ends every rank.
  [[noreturn]] void abort(const std::string& message, int exit_code);
  void finalize();

 private:
  MpiWorld() = default;
  int32_t rank_ = 0, ranks_ = 1, local_rank_ = 0;
  double timeout_s_ = 120;
  MPI_Comm host_comm_ = MPI_COMM_NULL;
  MPI_Comm gradient_comm_ = MPI_COMM_NULL;
  bool finalized_ = false;
};

// The host's side of a Collectives over MPI, which the CPU backend's and the
// NCCL collectives share: rank, exchanges and aborts through the MpiWorld.
class MpiHostCollectives : public Collectives {
 public:
  explicit MpiHostCollectives(std::unique_ptr<MpiWorld> world) : world_(std::move(world)) {}
  int32_t rank() const override { return world_->rank(); }
  int32_t ranks() const override { return world_->ranks(); }
  void set_timeout_s(double seconds) override { world_->set_timeout_s(seconds); }
  void exchange(const void* mine, size_t bytes, void* all, const char* what) override {
    world_->exchange(mine, bytes, all, what);
  }
  void broadcast(void* data, size_t bytes, const char* what) override { world_->broadcast(data, bytes, what); }
  [[noreturn]] void abort(const std::string& message, int exit_code) override { world_->abort(message, exit_code); }

 protected:
  std::unique_ptr<MpiWorld> world_;
};

// "rank 1", "ranks 1, 3": the ranks of a list, for messages.
std::string rank_list(const std::vector<int>& ranks);

}  // namespace mplan::rt
