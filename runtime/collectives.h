#pragma once
// Data-parallel training on several ranks (docs/generated-program.md, "Several
// ranks"): one process per rank, each running the same plan on its share of
// the global batch; the weight gradients are summed over the ranks bucket by
// bucket before the update, and the host's few values (the loss, evaluation
// metrics, start-up checks) are exchanged between the ranks.
//
// This header is backend-neutral and names no MPI or NCCL type: a
// single-rank program never includes an implementation. A multi-rank program
// links one (runtime/mpi: the CPU backend's sums over MPI; runtime/cuda's
// NCCL sums with MPI's bootstrap) and names its make_collectives in its
// ProgramSpec.
//
// Every operation that waits for other ranks is bounded: it polls against the
// collective timeout and, past it, prints which rank(s) it was waiting for
// and ends every rank (MPI_Abort), so that a rank that died or hangs never
// leaves the others waiting silently.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace mplan::rt {

struct Region;
struct ProgramSpec;

// One gradient bucket: the resident byte ranges of its dW blocks (float32),
// summed over the ranks together once the last round's backward pass has
// finished all of them.
struct GradientBucketSpec {
  const Region* regions;
  int32_t region_count;
  int64_t bytes;
};

class Collectives;

// What codegen writes of a multi-rank plan (plan.json "data_parallel").
struct DataParallelSpec {
  int32_t ranks;                       // the plan's ranks (> 1)
  int64_t global_batch;                // ranks x ProgramSpec::batch: the loss is the mean over it
  const GradientBucketSpec* buckets;   // in the order the backward pass finishes them
  int32_t bucket_count;
  // Batch norm's running statistics: rank 0's are broadcast to every rank
  // before a save and before an evaluation (DDP's broadcast_buffers).
  const Region* running_statistics;
  int32_t running_statistic_count;
  // A digest of the plan (its model's digest and a hash of the schedule):
  // every rank must run the same one.
  const char* plan_digest;
  // The implementation the program links (runtime/mpi or runtime/cuda's NCCL).
  std::unique_ptr<Collectives> (*make_collectives)(int* argc, char*** argv, std::string* error);
  // Where ranks run plans of their own (plan_of_rank, docs/multi-gpu.md):
  // the spec of each rank's schedule; null: every rank runs this spec's.
  const ProgramSpec* (*spec_of_rank)(int32_t rank) = nullptr;
};

// The operations of one rank with the others.
class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t ranks() const = 0;
  // The limit of every wait for other ranks (train --collective-timeout).
  virtual void set_timeout_s(double seconds) = 0;

  // ---- the host's values ------------------------------------------------------------------
  // Every rank's `bytes` bytes, in rank order, into all[ranks * bytes].
  virtual void exchange(const void* mine, size_t bytes, void* all, const char* what) = 0;
  // Rank 0's `bytes` bytes at `data` onto every rank.
  virtual void broadcast(void* data, size_t bytes, const char* what) = 0;

  // ---- the gradient buckets ----------------------------------------------------------------
  // Binds the buckets to the device memory and the compute stream, once,
  // before the first step.
  virtual void bind(const DataParallelSpec& spec, std::byte* device_base, Stream* compute) = 0;
  // Starts bucket k's sum over the ranks, ordered after everything enqueued
  // on the compute stream so far (the bucket's ready step).
  virtual void start_bucket(int32_t bucket) = 0;
  // Makes the compute stream wait for every bucket started in this step.
  virtual void wait_buckets() = 0;
  // The host waits, bounded, until every started bucket has been summed.
  virtual void finish_step() = 0;

  // Prints `message` (prefixed "train: rank R: ") and ends every rank with `exit_code`.
  [[noreturn]] virtual void abort(const std::string& message, int exit_code) = 0;
  // The end of a run that every rank reached (MPI_Finalize).
  virtual void finalize() = 0;
};

// Defined by the implementation a multi-rank program links: initialises MPI
// (and NCCL), or returns null with *error when the process was not started
// by mpirun or MPI cannot start.
std::unique_ptr<Collectives> make_collectives(int* argc, char*** argv, std::string* error);

// values[0 .. count) summed over the ranks in a fixed order, 0 + rank 0's +
// rank 1's + ... (in double), so that every rank holds the same bits.
inline void sum_over_ranks(Collectives& collectives, double* values, int count, const char* what) {
  std::vector<double> all(static_cast<size_t>(collectives.ranks()) * static_cast<size_t>(count));
  collectives.exchange(values, sizeof(double) * static_cast<size_t>(count), all.data(), what);
  for (int i = 0; i < count; ++i) {
    double sum = 0;
    for (int32_t q = 0; q < collectives.ranks(); ++q) sum += all[static_cast<size_t>(q) * count + i];
    values[i] = sum;
  }
}

// The default of train --collective-timeout, in seconds.
inline constexpr double kDefaultCollectiveTimeoutS = 120;

}  // namespace mplan::rt
