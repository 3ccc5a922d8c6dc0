#pragma once
// The data dependencies between the tasks of a TDFG, as plain edges, and the
// check that the TDFG's execution order respects them. The Boost.Graph that
// does the checking stays in tdfg/task_graph.cpp.

#include <utility>
#include <vector>

#include "core/error.h"
#include "tdfg/tdfg.h"

namespace mplan {

// A dependency: `before` must run before `after`.
struct TaskEdge {
  TaskId before = kNoTask;
  TaskId after = kNoTask;
  BlockId block = kNoBlock;  // the block that makes the dependency
  bool operator==(const TaskEdge&) const = default;
};

// The dependencies implied by the blocks' writers and readers, independent of
// the order the tasks are listed in:
//  - non-resident block: its creating writer (the one that does not also read
//    it) before every accumulating writer, and every writer before every task
//    that only reads it;
//  - but a gradient block's in-place BP1 (Task::in_place), which writes dX
//    over its layer's dY: after every writer that does not rewrite it and
//    every rewriter of a layer above, after the readers of its own layer's
//    gradient or one above (BP2 of its layer), before those of layers below;
//  - resident block written by the update: every other task that touches it
//    before the update (the update is the only one that replaces W).
// Sorted by (before, after, block), without duplicates.
std::vector<TaskEdge> dependency_edges(const Tdfg& tdfg);

// Whether the dependency graph is acyclic (boost::topological_sort) and the
// listed task order is one of its topological orders; else the first problem.
Status check_task_order(const Tdfg& tdfg);

// Aborts (MPLAN_CHECK) when check_task_order fails: build_tdfg's self-check.
void check_order_is_topological(const Tdfg& tdfg);

}  // namespace mplan
