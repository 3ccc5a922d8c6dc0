// Checkmate's MILP (planner/checkmate_milp.h) against optima computed by hand
// on a small chain, each schedule checked by a replay written here: every
// computation finds its inputs, and the memory after each node of each stage,
// freed as Checkmate frees it, stays within the budget.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "planner/checkmate_milp.h"

namespace mplan {
namespace {

// A training chain of 4 layers, one unit of output each: forward nodes 0-3
// (node 0 reads the input data, which is not a node), backward nodes 4-7;
// node 4 reads 3, node 5 reads 4 and 2, node 6 reads 5 and 1, node 7 reads
// 6 and 0. Forward costs 5, 1, 3, 2 ms; backward 1 ms each, never rerun.
RematGraph chain() {
  RematGraph g;
  g.compute_ms = {5, 1, 3, 2, 1, 1, 1, 1};
  g.output_bytes.assign(8, 1.0);
  g.recomputable = {true, true, true, true, false, false, false, false};
  g.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {2, 5}, {5, 6}, {1, 6}, {6, 7}, {0, 7}};
  return g;
}

// Replays the schedule: the most memory held at once, or a message naming
// the first computation whose input is missing.
double replay_peak(const RematGraph& g, const RematSchedule& s, std::string* error) {
  const int32_t n = static_cast<int32_t>(g.compute_ms.size());
  double peak = 0;
  for (int32_t t = 0; t < n; ++t) {
    std::set<int32_t> held;
    for (int32_t i = 0; i < t; ++i)
      if (s.kept[t][i]) {
        if (t == 0 || !(s.kept[t - 1][i] || s.computed[t - 1][i])) *error = "kept without being there before";
        held.insert(i);
      }
    for (int32_t k = 0; k <= t; ++k) {
      if (!s.computed[t][k]) continue;
      for (const auto& [u, v] : g.edges)
        if (v == k && !held.count(u)) *error = "stage " + std::to_string(t) + ": node " + std::to_string(k) +
                                               " runs without node " + std::to_string(u);
      held.insert(k);
      double bytes = 0;
      for (int32_t i : held) bytes += g.output_bytes[i];
      peak = std::max(peak, bytes);
      // Free what no later computation of this stage reads and the next stage does not keep.
      for (auto it = held.begin(); it != held.end();) {
        const int32_t i = *it;
        bool needed = t + 1 < n && s.kept[t + 1][i];
        for (const auto& [u, v] : g.edges) needed = needed || (u == i && v > k && v <= t && s.computed[t][v]);
        bool used_here = false;
        for (const auto& [u, v] : g.edges) used_here = used_here || (u == i && v <= k && s.computed[t][v]);
        it = !needed && used_here ? held.erase(it) : std::next(it);
      }
    }
  }
  return peak;
}

double recomputed_ms(const RematGraph& g, const RematSchedule& s) {
  double ms = 0;
  for (size_t t = 0; t < s.computed.size(); ++t)
    for (size_t i = 0; i < t; ++i)
      if (s.computed[t][i]) ms += g.compute_ms[i];
  return ms;
}

constexpr double kAllOnceMs = 5 + 1 + 3 + 2 + 4;

// Budget 5: keeping every output until its last user fits (stage 4 holds
// outputs 0-3 and computes 4): nothing runs twice.
TEST(CheckmateMilp, EnoughMemoryRunsEveryNodeOnce) {
  RematOptions o;
  o.budget_bytes = 5;
  const RematSchedule s = solve_checkmate(chain(), o);
  ASSERT_TRUE(s.solved) << s.why;
  EXPECT_TRUE(s.optimal);
  EXPECT_DOUBLE_EQ(s.total_ms, kAllOnceMs);
  std::string error;
  EXPECT_LE(replay_peak(chain(), s, &error), 5.0);
  EXPECT_EQ(error, "");
}

// Budget 4: one output must be away at stages 4-5. Recomputing node 1
// (1 ms) before stage 6 is the cheapest: dropping node 2 would need it back
// with node 4's and 5's outputs at stage 5 (5 units), node 3 is needed at
// once, and node 0 costs 5 ms.
TEST(CheckmateMilp, TightMemoryRecomputesTheCheapestNodeThatHelps) {
  RematOptions o;
  o.budget_bytes = 4;
  const RematGraph g = chain();
  const RematSchedule s = solve_checkmate(g, o);
  ASSERT_TRUE(s.solved) << s.why;
  EXPECT_TRUE(s.optimal);
  EXPECT_DOUBLE_EQ(s.total_ms, kAllOnceMs + 1);
  EXPECT_DOUBLE_EQ(recomputed_ms(g, s), 1.0);
  std::string error;
  EXPECT_LE(replay_peak(g, s, &error), 4.0 + 1e-9);
  EXPECT_EQ(error, "");
}

// Node 1 may not run again: the next best is recomputing node 0 (5 ms) for node 7.
TEST(CheckmateMilp, ANodeThatMayNotRunAgainIsNotRecomputed) {
  RematGraph g = chain();
  g.recomputable[1] = false;
  RematOptions o;
  o.budget_bytes = 4;
  const RematSchedule s = solve_checkmate(g, o);
  ASSERT_TRUE(s.solved) << s.why;
  EXPECT_TRUE(s.optimal);
  EXPECT_DOUBLE_EQ(s.total_ms, kAllOnceMs + 5);
  for (size_t t = 2; t < s.computed.size(); ++t) EXPECT_FALSE(s.computed[t][1]) << "stage " << t;
  std::string error;
  EXPECT_LE(replay_peak(g, s, &error), 4.0 + 1e-9);
  EXPECT_EQ(error, "");
}

// A stage that recomputes a chain frees each link after its last user there.
// Nodes A -> B -> C -> D -> E, and E also reads B; sizes 1, 1, 2, 1, 1; D
// and E never rerun. At budget 3, stage 3 cannot hold B beside C and D, nor
// A, so stage 4 recomputes A (1 ms) then B (2 ms): 1 + 1 + D's 1 = 3 units
// after B, A freed, then E: 3 units. Were A not freed before E, stage 4
// would need 4 and no schedule would fit.
TEST(CheckmateMilp, RecomputingAChainFreesEachLinkAfterItsLastUser) {
  RematGraph g;
  g.compute_ms = {1, 2, 4, 1, 1};
  g.output_bytes = {1, 1, 2, 1, 1};
  g.recomputable = {true, true, true, false, false};
  g.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {1, 4}};
  RematOptions o;
  o.budget_bytes = 3;
  const RematSchedule s = solve_checkmate(g, o);
  ASSERT_TRUE(s.solved) << s.why;
  EXPECT_TRUE(s.optimal);
  EXPECT_DOUBLE_EQ(s.total_ms, 9 + 1 + 2);
  EXPECT_TRUE(s.computed[4][0] && s.computed[4][1]);
  std::string error;
  EXPECT_LE(replay_peak(g, s, &error), 3.0 + 1e-9);
  EXPECT_EQ(error, "");
}

// Below what any stage needs (a node and its input), there is no schedule.
TEST(CheckmateMilp, TooLittleMemoryHasNoSchedule) {
  RematOptions o;
  o.budget_bytes = 1.5;
  const RematSchedule s = solve_checkmate(chain(), o);
  EXPECT_FALSE(s.solved);
  EXPECT_NE(s.why.find("no schedule"), std::string::npos) << s.why;
}

TEST(CheckmateMilp, GraphsBeyondTheLimitAreNotAttempted) {
  RematGraph g = chain();
  RematOptions o;
  o.budget_bytes = 4;
  o.max_nodes = 6;
  const RematSchedule s = solve_checkmate(g, o);
  EXPECT_FALSE(s.solved);
  EXPECT_NE(s.why.find("8 tasks"), std::string::npos) << s.why;
}

}  // namespace
}  // namespace mplan
