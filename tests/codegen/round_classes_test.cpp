// Grouping rounds into classes (codegen/round_classes.h): Myers' alignment
// checked against a brute-force longest common subsequence on random
// sequences, and the classes it makes.

#include <gtest/gtest.h>

#include <random>

#include "codegen/round_classes.h"

namespace mplan::codegen {
namespace {

int lcs_length(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<std::vector<int>> t(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

// 2000 random pairs (a sequence and an edited copy): the alignment is a common
// subsequence of the longest length, found iff the edit distance is within the limit.
TEST(Align, FindsALongestCommonSubsequenceWithinTheLimit) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint64_t> a(random() % 30);
    for (uint64_t& x : a) x = random() % 6;
    std::vector<uint64_t> b = a;
    const int edits = random() % 6;
    for (int e = 0; e < edits; ++e) {
      if (!b.empty() && random() % 2) b.erase(b.begin() + random() % b.size());
      else b.insert(b.begin() + (b.empty() ? 0 : random() % (b.size() + 1)), random() % 6);
    }
    const int lcs = lcs_length(a, b);
    const int distance = static_cast<int>(a.size() + b.size()) - 2 * lcs;
    const int limit = random() % 8;
    std::vector<std::pair<int, int>> matches;
    const bool found = align(a, b, limit, &matches);
    ASSERT_EQ(found, distance <= limit) << "trial " << trial;
    if (!found) continue;
    ASSERT_EQ(static_cast<int>(matches.size()), lcs) << "trial " << trial;
    for (size_t m = 0; m < matches.size(); ++m) {
      EXPECT_EQ(a[matches[m].first], b[matches[m].second]);
      if (m > 0) {
        EXPECT_LT(matches[m - 1].first, matches[m].first);
        EXPECT_LT(matches[m - 1].second, matches[m].second);
      }
    }
  }
}

// Rounds 0..3 of a plan: the same steps but for round 0's extra input load at
// the front and the last round's missing prefetch at the end; the update is
// another thing altogether.
TEST(GroupRounds, AlikeRoundsShareAClassWithTheirDifferencesMarked) {
  const std::vector<uint64_t> steady = {10, 11, 12, 13, 14, 15, 99};  // 99: prefetch of the next input
  std::vector<uint64_t> first = steady;
  first.insert(first.begin(), {1, 2});  // its own input load
  std::vector<uint64_t> last(steady.begin(), steady.end() - 1);
  const std::vector<uint64_t> update = {50, 51, 52};
  const std::vector<RoundClass> classes = group_rounds({first, steady, steady, last, update}, 8);
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].members, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(classes[1].members, (std::vector<int>{4}));
  ASSERT_EQ(classes[0].steps.size(), 9u);
  // The input load: only round 0; the prefetch: all but the last.
  EXPECT_EQ(classes[0].steps[0], (std::vector<int>{0, -1, -1, -1}));
  EXPECT_EQ(classes[0].steps[2], (std::vector<int>{2, 0, 0, 0}));
  EXPECT_EQ(classes[0].steps[8], (std::vector<int>{8, 6, 6, -1}));
  // A limit of 1 keeps round 0 apart (2 extra steps).
  EXPECT_EQ(group_rounds({first, steady, steady, last, update}, 1).size(), 3u);
}

}  // namespace
}  // namespace mplan::codegen
