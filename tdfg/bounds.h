#pragma once
// Memory bounds of a TDFG without any planning: what weights take,
// the naive network-wide allocation, the liveness peak, and moDNN's Mmin.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tdfg/tdfg.h"

namespace mplan {

// Plans place every block at a multiple of this many bytes (cudaMalloc's
// alignment; planner/plan.h kPlanAlignmentBytes is the same).
inline constexpr int64_t kBlockAlignmentBytes = 256;
// The bytes a block of `bytes` takes in a plan: rounded up to the alignment, at least one unit.
inline int64_t aligned_block_bytes(int64_t bytes) {
  return (std::max<int64_t>(1, bytes) + kBlockAlignmentBytes - 1) / kBlockAlignmentBytes * kBlockAlignmentBytes;
}

struct LayerBytes {
  LayerId layer = kModelInput;
  int64_t parameters = 0;
  int64_t forward_bytes = 0;   // Y and saved state of the layer at the batch
  int64_t backward_bytes = 0;  // dY of the layer at the batch
};

struct MemoryBounds {
  int64_t batch = 0;
  // Weights, their gradients and optimizer state (and batchnorm buffers): SW.
  int64_t weight_bytes = 0;
  // Every block alive at once, at the full batch (no reuse at all): the sum of
  // all blocks' bytes(batch), resident ones (SW) included.
  int64_t naive_bytes = 0;
  // Peak when each block is freed after its last use, no offloading,
  // zero-workspace algorithms, at the full batch; and the task at the peak
  // (the earliest one on a tie). See liveness_profile.
  int64_t liveness_peak_bytes = 0;
  TaskId liveness_peak_task = kNoTask;
  // moDNN Eq. 2: SW + max over tasks of its non-resident inputs and outputs at
  // sub-batch 1 (zero-workspace algorithms); and the task that sets it (the
  // earliest one on a tie). A block both read and written counts once. Every
  // block counts as a plan places it, rounded up to kBlockAlignmentBytes (at
  // least one unit), so that this is exactly the least budget `mplan compile`
  // accepts when the leanest algorithms need no workspace.
  int64_t modnn_min_bytes = 0;
  TaskId modnn_min_task = kNoTask;
  // The same at the least samples a round may have (least_batchnorm_round):
  // for a model whose batch norm sees one value per channel and sample (a
  // batchnorm on a vector), sub-batch 1 is no legal plan, and this is the
  // least budget `mplan compile` accepts. Equal to modnn_min_bytes otherwise.
  int64_t least_round = 1;
  int64_t least_round_min_bytes = 0;
  std::vector<LayerBytes> layers;
};

// Bounds at `batch` (>= 1; the Tdfg's model gives the per-layer table).
MemoryBounds compute_bounds(const Tdfg& tdfg, int64_t batch);

// Batch-norm semantics (docs/planner.md): the least samples a round must have
// so that every layer with batch statistics sees at least two values per
// channel (1 when the model has none; 2 for a batchnorm on a vector).
int64_t least_batchnorm_round(const Tdfg& tdfg);

// Bytes alive during each task when non-resident blocks are allocated just
// before their first writer and freed after their last use (last reader, or
// last writer for a block nobody reads, e.g. the loss), at sub-batch b, with
// extra per-task workspace bytes (empty = none) added during the task.
// X and labels have no writer: they are there from the first task on.
// live[i] is the peak during task i: the resident blocks (SW), every block
// whose interval [first writer, last use] contains i, and workspace[i]. A
// block freed after task i still counts during i; one allocated for task i+1
// does not.
std::vector<int64_t> liveness_profile(const Tdfg& tdfg, int64_t sub_batch,
                                      const std::vector<int64_t>& workspace_bytes = {});

}  // namespace mplan
