#include "codegen/round_classes.h"

#include <algorithm>

namespace mplan::codegen {

bool align(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, int max_differences,
           std::vector<std::pair<int, int>>* matches) {
  // Myers' greedy algorithm: V[k] is the furthest x on diagonal k = x - y
  // reached with d differences; the V of every d is kept to walk back.
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  const int limit = std::min(max_differences, n + m);
  const int offset = limit + 1;
  std::vector<std::vector<int>> trace;
  std::vector<int> v(2 * offset + 1, 0);
  int found = -1;
  for (int d = 0; d <= limit && found < 0; ++d) {
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) ? v[offset + k + 1]
                                                                            : v[offset + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) {
        ++x;
        ++y;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    trace.push_back(v);
  }
  if (found < 0) return false;
  // Walk back from (n, m) through the kept V's, collecting the diagonal moves.
  matches->clear();
  int x = n, y = m;
  for (int d = found; d >= 0; --d) {
    const std::vector<int>& prev = d > 0 ? trace[d - 1] : trace[0];
    const int k = x - y;
    int prev_k, prev_x;
    if (d == 0) {
      prev_k = 0;
      prev_x = 0;
    } else {
      prev_k = (k == -d || (k != d && prev[offset + k - 1] < prev[offset + k + 1])) ? k + 1 : k - 1;
      prev_x = prev[offset + prev_k];
    }
    const int prev_y = prev_x - prev_k;
    // The snake: from the end of the previous step's move to (x, y).
    const int start_x = d == 0 ? 0 : (prev_k == k + 1 ? prev_x : prev_x + 1);
    while (x > start_x) {
      --x;
      --y;
      matches->push_back({x, y});
    }
    x = prev_x;
    y = prev_y;
  }
  std::reverse(matches->begin(), matches->end());
  return true;
}

std::vector<RoundClass> group_rounds(const std::vector<std::vector<uint64_t>>& segments, int max_differences) {
  std::vector<RoundClass> classes;
  std::vector<std::vector<uint64_t>> templates;  // each class's step signatures
  for (int s = 0; s < static_cast<int>(segments.size()); ++s) {
    const std::vector<uint64_t>& steps = segments[s];
    bool joined = false;
    for (size_t c = 0; c < classes.size() && !joined; ++c) {
      std::vector<std::pair<int, int>> matches;
      if (!align(templates[c], steps, max_differences, &matches)) continue;
      // Merge: the class's steps and the new member's, in the order of both.
      RoundClass& cls = classes[c];
      const size_t members = cls.members.size();
      std::vector<std::vector<int>> merged;
      std::vector<uint64_t> merged_template;
      int i = 0, j = 0;
      auto add_class_step = [&](int t, int member_step) {
        std::vector<int> row = cls.steps[t];
        row.push_back(member_step);
        merged.push_back(std::move(row));
        merged_template.push_back(templates[c][t]);
      };
      auto add_member_step = [&](int member_step) {
        std::vector<int> row(members, -1);
        row.push_back(member_step);
        merged.push_back(std::move(row));
        merged_template.push_back(steps[member_step]);
      };
      for (const auto& [ti, sj] : matches) {
        while (i < ti) add_class_step(i++, -1);
        while (j < sj) add_member_step(j++);
        add_class_step(i++, j++);
      }
      while (i < static_cast<int>(templates[c].size())) add_class_step(i++, -1);
      while (j < static_cast<int>(steps.size())) add_member_step(j++);
      cls.members.push_back(s);
      cls.steps = std::move(merged);
      templates[c] = std::move(merged_template);
      joined = true;
    }
    if (joined) continue;
    RoundClass cls;
    cls.members.push_back(s);
    for (int j = 0; j < static_cast<int>(steps.size()); ++j) cls.steps.push_back({j});
    classes.push_back(std::move(cls));
    templates.push_back(steps);
  }
  return classes;
}

}  // namespace mplan::codegen
