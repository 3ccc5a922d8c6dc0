#pragma once
// A configuration of one convolution kernel (forward, backward-data or
// backward-filter) over a batch: the batch split into micro-batches, each run
// with its own algorithm (mu-cuDNN §III-A, "configuration" = list of
// micro-configurations). The micro-batches run one after another and share
// one workspace, so a configuration's time is the sum and its workspace the
// max over its micro-batches.

#include <cstdint>
#include <string>
#include <vector>

namespace mplan::microbatch {

// One micro-batch of a configuration: its size and the algorithm that runs it,
// with that algorithm's time and workspace at this size.
struct MicroConfiguration {
  int64_t micro_batch = 0;
  std::string algorithm;
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

// A list of micro-configurations whose sizes add up to the kernel's batch.
struct Configuration {
  std::vector<MicroConfiguration> micro;

  // Sum of the micro-batches' times: they run one after another.
  double time_ms() const;
  // Max of the micro-batches' workspaces: they reuse one workspace.
  int64_t workspace_bytes() const;
  // Sum of the micro-batch sizes.
  int64_t batch() const;
  // Number of micro-batches.
  int64_t micro_batch_count() const { return static_cast<int64_t>(micro.size()); }

  // "[64×winograd, 64×winograd, 32×fft] 3.20 ms, 48.0 MiB".
  std::string to_string() const;
};

// The concatenation c1 ++ c2 (mu-cuDNN §III-A): the micro-batches of both.
Configuration concat(const Configuration& first, const Configuration& second);

// Sorts micro-configurations by size (largest first), then algorithm, so that
// equal configurations print and compare the same whatever order built them.
void canonicalize(Configuration& configuration);

}  // namespace mplan::microbatch
