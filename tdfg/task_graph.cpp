// Task dependencies of a TDFG with Boost.Graph: build the DAG of data
// dependencies, confirm it is acyclic, and confirm the listed execution order
// is topological (moDNN §II-2: "all the tasks are topologically sorted and will
// be executed following this order").

#include "tdfg/task_graph.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <tuple>

namespace mplan {

namespace {

bool contains(const std::vector<TaskId>& list, TaskId t) {
  return std::find(list.begin(), list.end(), t) != list.end();
}

// Whether t writes dX over the gradient block b it reads (an in-place BP1):
// the block then holds dY of t's layer before t and dX after it. An
// in-place add's BP1 writes its other inputs' gradients as any BP1 does.
bool rewrites_gradient(const Tdfg& tdfg, TaskId t, BlockId b) {
  const Task& task = tdfg.tasks[t];
  return task.kind == TaskKind::BP1 && task.in_place && tdfg.blocks[b].kind == BlockKind::gradient &&
         task.layer >= 0 && static_cast<size_t>(task.layer) < tdfg.gradient_of.size() &&
         tdfg.gradient_of[static_cast<size_t>(task.layer)] == b;
}

// The edges of a gradient block's in-place rewriter w: after the writers that
// make the block's first value (its creator and the accumulating BP1s of the
// top layer's consumers) and the rewriters of the layers above w's; after the
// readers of the gradient of w's layer or one above (BP2(w's layer) reads
// the dY that w overwrites), before the readers of the layers below.
void add_rewriter_edges(const Tdfg& tdfg, const Block& block, BlockId b, TaskId w, std::vector<TaskEdge>& edges) {
  const LayerId layer = tdfg.tasks[w].layer;
  for (TaskId other : block.writers) {
    if (other == w) continue;
    if (!rewrites_gradient(tdfg, other, b) || tdfg.tasks[other].layer > layer) edges.push_back({other, w, b});
  }
  for (TaskId r : block.readers) {
    if (contains(block.writers, r)) continue;
    if (tdfg.tasks[r].layer >= layer) edges.push_back({r, w, b});
    else edges.push_back({w, r, b});
  }
}

}  // namespace

std::vector<TaskEdge> dependency_edges(const Tdfg& tdfg) {
  std::vector<TaskEdge> edges;
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b) {
    const Block& block = tdfg.blocks[b];
    if (block.resident) {
      const TaskId update = tdfg.update_task;
      if (update == kNoTask || !contains(block.writers, update)) {
        // Written by someone else (dW by BP2): writers before readers.
        for (TaskId w : block.writers)
          for (TaskId r : block.readers)
            if (w != r) edges.push_back({w, r, b});
        continue;
      }
      for (TaskId t : block.readers)
        if (t != update) edges.push_back({t, update, b});
      for (TaskId t : block.writers)
        if (t != update) edges.push_back({t, update, b});
      continue;
    }
    for (TaskId w : block.writers) {
      if (rewrites_gradient(tdfg, w, b)) {
        add_rewriter_edges(tdfg, block, b, w, edges);
        continue;
      }
      const bool creates = !contains(block.readers, w);
      for (TaskId other : block.writers)
        if (creates && other != w && contains(block.readers, other)) edges.push_back({w, other, b});
      for (TaskId r : block.readers)
        if (!contains(block.writers, r)) edges.push_back({w, r, b});
    }
  }
  std::sort(edges.begin(), edges.end(), [](const TaskEdge& x, const TaskEdge& y) {
    return std::tie(x.before, x.after, x.block) < std::tie(y.before, y.after, y.block);
  });
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

Status check_task_order(const Tdfg& tdfg) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  const auto task_count = static_cast<TaskId>(tdfg.tasks.size());
  const std::vector<TaskEdge> edges = dependency_edges(tdfg);
  Graph graph(tdfg.tasks.size());
  for (const TaskEdge& e : edges) {
    if (e.before < 0 || e.before >= task_count || e.after < 0 || e.after >= task_count)
      return Error{{}, fmt::format("block {} names a task id out of range", e.block)};
    boost::add_edge(e.before, e.after, graph);
  }
  std::vector<Graph::vertex_descriptor> reverse_order;
  try {
    boost::topological_sort(graph, std::back_inserter(reverse_order));
  } catch (const boost::not_a_dag&) {
    return Error{{}, "the task dependencies have a cycle"};
  }
  // Tasks are listed in execution order, so a task's id is its position.
  for (const TaskEdge& e : edges) {
    if (e.before >= e.after)
      return Error{{}, fmt::format("{} must run before {} (block {}) but is listed after it",
                                   tdfg.tasks[e.before].name, tdfg.tasks[e.after].name,
                                   tdfg.blocks[e.block].name)};
  }
  return Ok{};
}

void check_order_is_topological(const Tdfg& tdfg) {
  const Status status = check_task_order(tdfg);
  MPLAN_CHECK(status.ok(), status.ok() ? std::string() : "build_tdfg: " + status.error().message);
}

}  // namespace mplan
