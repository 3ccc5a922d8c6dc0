#include "planner/microbatch/desirable_set.h"

#include <algorithm>
#include <tuple>

namespace mplan::microbatch {
namespace {

// A point of D(b) without its micro-batch list, which is rebuilt only for the
// points of D(batch): either one micro-batch (row, option) or the
// concatenation of point `left` of D(split) and point `right` of D(b − split).
struct Point {
  double time_ms = 0;
  int64_t workspace_bytes = 0;
  int64_t micro_batches = 0;
  const MicroBatchBenchmark* row = nullptr;
  int option = -1;
  int64_t split = 0;
  int32_t left = -1, right = -1;
};

// Times that differ by less than this fraction are the same time: sums of the
// same micro-batch times in another order differ in the last bits, and such
// twins would only add ILP variables that cost more workspace for nothing.
constexpr double kSameTimeFraction = 1e-9;

bool clearly_faster(double time_ms, double than_ms) {
  return time_ms < than_ms - kSameTimeFraction * than_ms;
}

// P(...): sort by (workspace, time, micro-batches) and keep each point faster
// than every point before it.
std::vector<Point> prune(std::vector<Point> points) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.workspace_bytes, a.time_ms, a.micro_batches) <
           std::tie(b.workspace_bytes, b.time_ms, b.micro_batches);
  });
  std::vector<Point> front;
  for (const Point& p : points)
    if (front.empty() || clearly_faster(p.time_ms, front.back().time_ms)) front.push_back(p);
  return front;
}

// The candidates of {c1 ++ c2 : c1 ∈ a, c2 ∈ b} that can be on the front, for
// two fronts (ascending workspace, descending time). For any pair with
// workspace L = max(w1, w2), the pair (fastest of a within L, fastest of b
// within L) is at least as good, and those are the last points of each front
// with workspace <= L; so sweeping L over all workspaces of a and b in
// ascending order yields every useful pair: |a| + |b| candidates, not |a|·|b|.
void append_concatenations(const std::vector<Point>& a, const std::vector<Point>& b, int64_t split,
                           std::vector<Point>& out) {
  size_t next_a = 0, next_b = 0;
  int32_t last_a = -1, last_b = -1;
  while (next_a < a.size() || next_b < b.size()) {
    const int64_t level = std::min(next_a < a.size() ? a[next_a].workspace_bytes : INT64_MAX,
                                   next_b < b.size() ? b[next_b].workspace_bytes : INT64_MAX);
    while (next_a < a.size() && a[next_a].workspace_bytes == level) last_a = static_cast<int32_t>(next_a++);
    while (next_b < b.size() && b[next_b].workspace_bytes == level) last_b = static_cast<int32_t>(next_b++);
    if (last_a < 0 || last_b < 0) continue;
    const Point& x = a[last_a];
    const Point& y = b[last_b];
    Point p;
    p.time_ms = x.time_ms + y.time_ms;
    p.workspace_bytes = std::max(x.workspace_bytes, y.workspace_bytes);
    p.micro_batches = x.micro_batches + y.micro_batches;
    p.split = split;
    p.left = last_a;
    p.right = last_b;
    out.push_back(p);
  }
}

void expand(const std::vector<std::vector<Point>>& fronts, int64_t b, int32_t index,
            Configuration& out) {
  const Point& p = fronts[b][index];
  if (p.row != nullptr) {
    const TaskOption& o = p.row->options[p.option];
    out.micro.push_back({b, o.algorithm, o.time_ms, o.workspace_bytes});
    return;
  }
  expand(fronts, p.split, p.left, out);
  expand(fronts, b - p.split, p.right, out);
}

}  // namespace

std::vector<Configuration> pareto_front(std::vector<Configuration> configurations) {
  struct Key {
    double time_ms;
    int64_t workspace_bytes;
    int64_t micro_batches;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < configurations.size(); ++i)
    keys.push_back({configurations[i].time_ms(), configurations[i].workspace_bytes(),
                    configurations[i].micro_batch_count(), i});
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.workspace_bytes, a.time_ms, a.micro_batches, a.index) <
           std::tie(b.workspace_bytes, b.time_ms, b.micro_batches, b.index);
  });
  std::vector<Configuration> front;
  double best_time_ms = 0;
  for (const Key& k : keys) {
    if (!front.empty() && !clearly_faster(k.time_ms, best_time_ms)) continue;
    best_time_ms = k.time_ms;
    front.push_back(std::move(configurations[k.index]));
  }
  return front;
}

std::vector<Configuration> desirable_configurations(const BenchmarkTable& table, int64_t batch,
                                                    BatchSizePolicy policy,
                                                    int64_t workspace_limit_bytes) {
  MPLAN_CHECK(batch >= 1, "a kernel's batch must be at least 1");
  std::vector<std::vector<Point>> fronts(batch + 1);
  std::vector<std::vector<Point>> singles(batch + 1);
  for (const MicroBatchBenchmark* row : rows_for_policy(table, policy, batch)) {
    for (int i = 0; i < static_cast<int>(row->options.size()); ++i) {
      const TaskOption& o = row->options[i];
      if (o.workspace_bytes > workspace_limit_bytes) continue;
      Point p;
      p.time_ms = o.time_ms;
      p.workspace_bytes = o.workspace_bytes;
      p.micro_batches = 1;
      p.row = row;
      p.option = i;
      singles[row->micro_batch].push_back(p);
    }
  }
  for (int64_t b = 1; b <= batch; ++b) {
    std::vector<Point> candidates = std::move(singles[b]);
    for (int64_t first = 1; first <= b / 2; ++first)
      append_concatenations(fronts[first], fronts[b - first], first, candidates);
    fronts[b] = prune(std::move(candidates));
  }
  std::vector<Configuration> desirable;
  for (int32_t i = 0; i < static_cast<int32_t>(fronts[batch].size()); ++i) {
    Configuration c;
    expand(fronts, batch, i, c);
    canonicalize(c);
    desirable.push_back(std::move(c));
  }
  return desirable;
}

}  // namespace mplan::microbatch
