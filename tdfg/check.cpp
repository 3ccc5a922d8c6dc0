// Structural invariants of a TDFG (check_tdfg): the TDFG's own verifier, run by
// the tests after every build (docs/style.md: verify after every stage).

#include <fmt/format.h>

#include <algorithm>

#include "tdfg/task_graph.h"
#include "tdfg/tdfg.h"

namespace mplan {

namespace {

bool contains(const std::vector<BlockId>& list, BlockId x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

bool strictly_increasing(const std::vector<TaskId>& list) {
  return std::adjacent_find(list.begin(), list.end(),
                            [](TaskId a, TaskId b) { return a >= b; }) == list.end();
}

Error violation(std::string message) { return Error{{}, "TDFG: " + std::move(message)}; }

Status check_ids(const Tdfg& tdfg) {
  const auto task_count = static_cast<TaskId>(tdfg.tasks.size());
  const auto block_count = static_cast<BlockId>(tdfg.blocks.size());
  auto task_ok = [&](TaskId t) { return t >= 0 && t < task_count; };
  auto block_ok = [&](BlockId b) { return b >= 0 && b < block_count; };
  for (const Task& task : tdfg.tasks) {
    for (BlockId b : task.reads)
      if (!block_ok(b)) return violation(fmt::format("{} reads block id {} out of range", task.name, b));
    for (BlockId b : task.writes)
      if (!block_ok(b)) return violation(fmt::format("{} writes block id {} out of range", task.name, b));
  }
  for (const Block& block : tdfg.blocks) {
    for (TaskId t : block.readers)
      if (!task_ok(t)) return violation(fmt::format("{} lists reader id {} out of range", block.name, t));
    for (TaskId t : block.writers)
      if (!task_ok(t)) return violation(fmt::format("{} lists writer id {} out of range", block.name, t));
  }
  if (tdfg.evaluation) {
    if (tdfg.update_task != kNoTask) return violation("an evaluation graph has an update");
    for (const Task& task : tdfg.tasks)
      if (task.kind != TaskKind::FP) return violation(fmt::format("an evaluation graph has {}", task.name));
  } else if (!task_ok(tdfg.update_task) || tdfg.update_task != task_count - 1 ||
             tdfg.tasks[tdfg.update_task].kind != TaskKind::update) {
    return violation("the update must be the last task");
  }
  for (BlockId b : {tdfg.input_block, tdfg.labels_block, tdfg.loss_block})
    if (!block_ok(b)) return violation(fmt::format("input, labels or loss block id {} out of range", b));
  if (tdfg.model != nullptr) {
    const size_t n = tdfg.model->layers.size();
    for (const auto* per_layer : {&tdfg.output_of, &tdfg.gradient_of, &tdfg.weight_of,
                                  &tdfg.weight_grad_of, &tdfg.state_of, &tdfg.saved_of})
      if (per_layer->size() != n) return violation("a per-layer block table has the wrong size");
    for (const auto* per_layer : {&tdfg.fp_of, &tdfg.bp1_of, &tdfg.bp2_of})
      if (per_layer->size() != n) return violation("a per-layer task table has the wrong size");
  }
  return Ok{};
}

// Task lists and block lists say the same thing, in execution order.
Status check_cross_references(const Tdfg& tdfg) {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    for (BlockId b : task.reads) {
      const auto& readers = tdfg.blocks[b].readers;
      if (std::count(readers.begin(), readers.end(), t) != 1)
        return violation(fmt::format("{} reads {} but is not listed once as its reader", task.name,
                                     tdfg.blocks[b].name));
    }
    for (BlockId b : task.writes) {
      const auto& writers = tdfg.blocks[b].writers;
      if (std::count(writers.begin(), writers.end(), t) != 1)
        return violation(fmt::format("{} writes {} but is not listed once as its writer", task.name,
                                     tdfg.blocks[b].name));
    }
  }
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (!strictly_increasing(block.readers) || !strictly_increasing(block.writers))
      return violation(block.name + ": readers and writers must be in execution order, once each");
    for (TaskId t : block.readers)
      if (!contains(tdfg.tasks[t].reads, b))
        return violation(fmt::format("{} lists reader {} which does not read it", block.name,
                                     tdfg.tasks[t].name));
    for (TaskId t : block.writers)
      if (!contains(tdfg.tasks[t].writes, b))
        return violation(fmt::format("{} lists writer {} which does not write it", block.name,
                                     tdfg.tasks[t].name));
  }
  return Ok{};
}

// Every block is made before it is read. Resident blocks (weights, state) and
// the iteration's inputs (X, labels) exist before the first task.
Status check_dataflow(const Tdfg& tdfg) {
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (block.bytes_per_sample < 0 || block.fixed_bytes < 0)
      return violation(block.name + " has a negative size");
    if (block.resident) {
      if (block.bytes_per_sample != 0)
        return violation(block.name + " is resident but its size depends on the sub-batch");
      continue;
    }
    const bool iteration_input = b == tdfg.input_block || b == tdfg.labels_block;
    if (iteration_input) {
      if (!block.writers.empty()) return violation(block.name + " is an input but a task writes it");
      continue;
    }
    if (block.writers.empty()) {
      if (!block.readers.empty()) return violation(block.name + " is read but never written");
      continue;
    }
    // The first writer creates the block; the others accumulate into it.
    if (contains(tdfg.tasks[block.writers.front()].reads, b))
      return violation(fmt::format("{}: its first writer {} reads it before it exists", block.name,
                                   tdfg.tasks[block.writers.front()].name));
    for (TaskId r : block.readers)
      if (r <= block.writers.front())
        return violation(fmt::format("{} is read by {} before it is written by {}", block.name,
                                     tdfg.tasks[r].name, tdfg.tasks[block.writers.front()].name));
    for (size_t i = 1; i < block.writers.size(); ++i)
      if (!contains(tdfg.tasks[block.writers[i]].reads, b))
        return violation(fmt::format("{} is overwritten by {} instead of accumulated", block.name,
                                     tdfg.tasks[block.writers[i]].name));
  }
  return Ok{};
}

}  // namespace

Status check_tdfg(const Tdfg& tdfg) {
  for (auto check : {check_ids, check_cross_references, check_dataflow, check_task_order}) {
    Status status = check(tdfg);
    if (!status.ok()) return status;
  }
  return Ok{};
}

}  // namespace mplan
