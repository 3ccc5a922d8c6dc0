// Graphviz text of a TDFG via boost::write_graphviz (docs/style.md: draw the TDFG
// to debug it). Tasks are boxes, blocks ellipses (resident blocks grey),
// edges go writer -> block -> reader.

// GCC reports a false maybe-uninitialized inside Boost's edge iterator
// (boost::optional) when write_graphviz is instantiated.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>

#include <sstream>
#include <string>

#include "tdfg/tdfg.h"

namespace mplan {

namespace {

struct DotVertex {
  std::string label;
  std::string attributes;  // shape and style
};

using DotGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, DotVertex>;

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct VertexWriter {
  const DotGraph* graph;
  void operator()(std::ostream& out, DotGraph::vertex_descriptor v) const {
    const DotVertex& vertex = (*graph)[v];
    out << "[label=" << quoted(vertex.label) << ", " << vertex.attributes << "]";
  }
};

struct GraphWriter {
  void operator()(std::ostream& out) const { out << "rankdir=TB;\n"; }
};

}  // namespace

std::string tdfg_to_dot(const Tdfg& tdfg) {
  DotGraph graph;
  for (const Task& task : tdfg.tasks)
    boost::add_vertex(DotVertex{task.name, "shape=box"}, graph);
  const auto first_block = tdfg.tasks.size();
  for (const Block& block : tdfg.blocks)
    boost::add_vertex(DotVertex{block.name, block.resident ? "shape=ellipse, style=filled, fillcolor=lightgrey"
                                                           : "shape=ellipse"},
                      graph);
  for (size_t b = 0; b < tdfg.blocks.size(); ++b) {
    for (TaskId w : tdfg.blocks[b].writers) boost::add_edge(w, first_block + b, graph);
    for (TaskId r : tdfg.blocks[b].readers) boost::add_edge(first_block + b, r, graph);
  }
  std::ostringstream out;
  boost::write_graphviz(out, graph, VertexWriter{&graph}, boost::default_writer(), GraphWriter{});
  return out.str();
}

}  // namespace mplan
