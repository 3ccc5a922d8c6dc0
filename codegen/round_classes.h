#pragma once
// Which rounds of a plan share one function of the generated program
// (codegen-internal). Rounds run the same tasks; they differ in where their
// buffers lie (table fields) and, at the ends of the batch, in a few steps
// that cross rounds: round 0 also loads its own input, the last round
// prefetches no next input. Rounds whose steps align up to a few such
// differences share one body, in which a step that only some rounds have is
// guarded by a flag of the table. Steps align by their code (their
// "signature"), with Myers' O(ND) difference algorithm (Myers 1986), so the
// cost is linear in the steps when rounds are alike.

#include <cstdint>
#include <vector>

namespace mplan::codegen {

struct RoundClass {
  std::vector<int> members;  // indices of the segments in the class, in order
  // The class's steps in order; for each, the step index in each member
  // (same order as `members`), or -1 where that member has no such step.
  std::vector<std::vector<int>> steps;
};

// Groups segments (each a sequence of step signatures) into classes. A
// segment joins the first class whose steps it aligns with in at most
// `max_differences` insertions and deletions; else it starts a class.
std::vector<RoundClass> group_rounds(const std::vector<std::vector<uint64_t>>& segments, int max_differences);

// The alignment of two sequences: pairs (i, j) with a[i] == b[j], increasing
// in both, as many as possible; nothing if more than `max_differences`
// insertions and deletions are needed (returns false).
bool align(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, int max_differences,
           std::vector<std::pair<int, int>>* matches);

}  // namespace mplan::codegen
