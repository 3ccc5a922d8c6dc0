// Memory bounds of a TDFG before any planning (tdfg/bounds.h).

#include "tdfg/bounds.h"

#include <algorithm>

namespace mplan {

namespace {

// Execution-order interval [first, last] during which a non-resident block
// must be on the device when nothing is offloaded.
struct LiveInterval {
  TaskId first = kNoTask;
  TaskId last = kNoTask;
};

LiveInterval live_interval(const Tdfg& tdfg, BlockId b) {
  const Block& block = tdfg.blocks[b];
  if (block.writers.empty() && block.readers.empty()) return {};
  LiveInterval interval;
  // Allocated just before its first writer; X and labels (no writer) are the
  // iteration's inputs and are there before the first task.
  interval.first = block.writers.empty() ? 0 : block.writers.front();
  // Freed after its last use (a block nobody reads, the loss, after its writer).
  interval.last = std::max(block.writers.empty() ? 0 : block.writers.back(),
                           block.readers.empty() ? 0 : block.readers.back());
  return interval;
}

// moDNN Eq. 1 without workspace: the non-resident blocks task t reads or
// writes, each aligned as a plan places it when `aligned`.
int64_t task_footprint_bytes(const Tdfg& tdfg, const Task& task, int64_t sub_batch, bool aligned) {
  std::vector<BlockId> touched = task.reads;
  touched.insert(touched.end(), task.writes.begin(), task.writes.end());
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  int64_t total = 0;
  for (BlockId b : touched) {
    if (tdfg.blocks[b].resident) continue;
    const int64_t bytes = tdfg.blocks[b].bytes(sub_batch);
    total += aligned ? aligned_block_bytes(bytes) : bytes;
  }
  return total;
}

// The op table's scratch of task t at sub-batch 1 (0 for the update and for
// tasks that choose an algorithm, whose leanest has no workspace), and the
// 16-bit copy of its weights where the task makes it (weights_cast_by_task);
// aligned.
int64_t task_scratch_bytes(const Tdfg& tdfg, TaskId t) {
  const Task& task = tdfg.tasks[t];
  if (t == tdfg.update_task || tdfg.model == nullptr) return 0;
  const Layer& layer = tdfg.model->layers.at(task.layer);
  const OpSpec& spec = op_spec(layer.op);
  int64_t bytes = 2 * weights_cast_by_task(*tdfg.model, task.layer, task.kind,
                                           tdfg.blocks.at(tdfg.output_of.at(task.layer)).dtype);
  if (!task.has_algorithms && spec.scratch_bytes != nullptr) {
    const std::vector<Shape> inputs = tdfg.model->input_shapes(task.layer);
    bytes += spec.scratch_bytes(OpTask{layer, inputs, layer.output, task.kind}, 1);
  }
  return bytes > 0 ? aligned_block_bytes(bytes) : 0;
}

}  // namespace

std::vector<int64_t> liveness_profile(const Tdfg& tdfg, int64_t sub_batch,
                                      const std::vector<int64_t>& workspace_bytes) {
  const size_t task_count = tdfg.tasks.size();
  MPLAN_CHECK(sub_batch >= 1, "liveness_profile: the sub-batch must be at least 1");
  MPLAN_CHECK(workspace_bytes.empty() || workspace_bytes.size() == task_count,
              "liveness_profile: one workspace size per task, or none");
  // Difference array over task positions: +bytes at first, -bytes after last.
  std::vector<int64_t> delta(task_count + 1, 0);
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    if (tdfg.blocks[b].resident) continue;
    const LiveInterval interval = live_interval(tdfg, b);
    if (interval.first == kNoTask) continue;
    delta[interval.first] += tdfg.blocks[b].bytes(sub_batch);
    delta[interval.last + 1] -= tdfg.blocks[b].bytes(sub_batch);
  }
  std::vector<int64_t> live(task_count, 0);
  int64_t running = tdfg.resident_bytes();
  for (size_t i = 0; i < task_count; ++i) {
    running += delta[i];
    live[i] = running + (workspace_bytes.empty() ? 0 : workspace_bytes[i]);
  }
  return live;
}

int64_t least_batchnorm_round(const Tdfg& tdfg) {
  int64_t least = 1;
  for (const Layer& l : tdfg.model->layers) {
    if (!op_spec(l.op).batch_statistics) continue;  // batch norm
    int64_t per_sample = 1;  // values per channel per sample: H * W
    for (size_t i = 1; i < l.output.dims.size(); ++i) per_sample *= l.output.dims[i];
    least = std::max<int64_t>(least, (2 + per_sample - 1) / per_sample);
  }
  return least;
}

MemoryBounds compute_bounds(const Tdfg& tdfg, int64_t batch) {
  MPLAN_CHECK(batch >= 1, "compute_bounds: the batch must be at least 1");
  MemoryBounds bounds;
  bounds.batch = batch;
  bounds.weight_bytes = tdfg.resident_bytes();
  for (const Block& block : tdfg.blocks) bounds.naive_bytes += block.bytes(batch);

  // Ties go to the earliest task.
  const std::vector<int64_t> live = liveness_profile(tdfg, batch);
  for (TaskId t = 0; t < static_cast<TaskId>(live.size()); ++t) {
    if (bounds.liveness_peak_task == kNoTask || live[t] > bounds.liveness_peak_bytes) {
      bounds.liveness_peak_bytes = live[t];
      bounds.liveness_peak_task = t;
    }
  }

  // moDNN Eq. 2: Mmin = SW + max_t (sum of I(t) and O(t) at sub-batch 1),
  // with the leanest option's workspace: none for a convolution (implicit
  // GEMM), the op table's fixed scratch for the others (batch norm's BP1), as
  // the planner counts it (planner/sub_batch.h minimum_budget).
  int64_t resident_region = 0;
  for (const Block& block : tdfg.blocks)
    if (block.resident) resident_region += aligned_block_bytes(block.bytes(1));
  const auto eq2_at = [&](int64_t sub_batch, TaskId* task) {
    int64_t largest_task_bytes = -1;
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
      const int64_t bytes =
          task_footprint_bytes(tdfg, tdfg.tasks[t], sub_batch, /*aligned=*/true) + task_scratch_bytes(tdfg, t);
      if (bytes > largest_task_bytes) {
        largest_task_bytes = bytes;
        if (task != nullptr) *task = t;
      }
    }
    return resident_region + std::max<int64_t>(largest_task_bytes, 0);
  };
  bounds.modnn_min_bytes = eq2_at(1, &bounds.modnn_min_task);
  bounds.least_round = tdfg.model != nullptr ? std::min(least_batchnorm_round(tdfg), batch) : 1;
  bounds.least_round_min_bytes = bounds.least_round == 1 ? bounds.modnn_min_bytes : eq2_at(bounds.least_round, nullptr);

  if (tdfg.model != nullptr) {
    const Model& model = *tdfg.model;
    for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
      LayerBytes row;
      row.layer = l;
      row.parameters = model.parameter_count(l);
      // A block shared by layers computed in place counts once, for the layer that creates it.
      for (BlockId b : {tdfg.output_of[l], tdfg.saved_of[l]})
        if (b != kNoBlock && tdfg.blocks[b].layer == l) row.forward_bytes += tdfg.blocks[b].bytes(batch);
      if (tdfg.gradient_of[l] != kNoBlock && tdfg.blocks[tdfg.gradient_of[l]].layer == l)
        row.backward_bytes = tdfg.blocks[tdfg.gradient_of[l]].bytes(batch);
      bounds.layers.push_back(row);
    }
  }
  return bounds;
}

}  // namespace mplan
