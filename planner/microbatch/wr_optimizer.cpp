#include "planner/microbatch/wr_optimizer.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "core/bytes.h"

namespace mplan::microbatch {
namespace {

constexpr double kNoTime = std::numeric_limits<double>::infinity();
constexpr int64_t kNoBytes = std::numeric_limits<int64_t>::max();

// How the best configuration of a batch b was made: one micro-batch running
// option `option` of `row`, or the best of `split` followed by the best of
// b − split (mu-cuDNN §III-B: "memorized and reused").
struct Choice {
  double time_ms = kNoTime;
  int64_t workspace_bytes = kNoBytes;
  int64_t micro_batches = 0;
  const MicroBatchBenchmark* row = nullptr;
  int option = -1;
  int64_t split = 0;
};

bool better(const Choice& a, const Choice& b) {
  return std::tie(a.time_ms, a.workspace_bytes, a.micro_batches) <
         std::tie(b.time_ms, b.workspace_bytes, b.micro_batches);
}

void expand(const std::vector<Choice>& best, int64_t b, Configuration& out) {
  const Choice& c = best[b];
  if (c.row != nullptr) {
    const TaskOption& o = c.row->options[c.option];
    out.micro.push_back({b, o.algorithm, o.time_ms, o.workspace_bytes});
    return;
  }
  expand(best, c.split, out);
  expand(best, b - c.split, out);
}

}  // namespace

Result<Configuration> optimize_wr(const BenchmarkTable& table, int64_t batch,
                                  int64_t workspace_limit_bytes, BatchSizePolicy policy) {
  MPLAN_CHECK(batch >= 1, "a kernel's batch must be at least 1");
  std::vector<Choice> best(batch + 1);
  // Tμ(b): the fastest algorithm at b that fits the limit (WR step 1).
  for (const MicroBatchBenchmark* row : rows_for_policy(table, policy, batch)) {
    Choice& single = best[row->micro_batch];
    for (int i = 0; i < static_cast<int>(row->options.size()); ++i) {
      const TaskOption& o = row->options[i];
      if (o.workspace_bytes > workspace_limit_bytes) continue;
      Choice candidate{o.time_ms, o.workspace_bytes, 1, row, i, 0};
      if (better(candidate, single)) single = candidate;
    }
  }
  // T(b) = min(Tμ(b), min over splits), b ascending (WR step 2). Splits with
  // the first part at most b/2 cover every unordered pair of parts.
  for (int64_t b = 2; b <= batch; ++b) {
    for (int64_t first = 1; first <= b / 2; ++first) {
      const Choice& x = best[first];
      const Choice& y = best[b - first];
      if (x.time_ms == kNoTime || y.time_ms == kNoTime) continue;
      Choice candidate{x.time_ms + y.time_ms, std::max(x.workspace_bytes, y.workspace_bytes),
                       x.micro_batches + y.micro_batches, nullptr, -1, first};
      if (better(candidate, best[b])) best[b] = candidate;
    }
  }
  if (best[batch].time_ms == kNoTime) {
    return Error{{}, fmt::format("kernel {}: no configuration of batch {} (policy {}) fits a "
                                 "workspace limit of {}; the leanest needs {}",
                                 table.kernel, batch, batch_size_policy_name(policy),
                                 format_bytes_exact(workspace_limit_bytes),
                                 format_bytes_exact(least_workspace_bytes(table, batch, policy)))};
  }
  Configuration configuration;
  expand(best, batch, configuration);
  canonicalize(configuration);
  return configuration;
}

int64_t least_workspace_bytes(const BenchmarkTable& table, int64_t batch, BatchSizePolicy policy) {
  std::vector<int64_t> least(batch + 1, kNoBytes);
  for (const MicroBatchBenchmark* row : rows_for_policy(table, policy, batch))
    for (const TaskOption& o : row->options)
      least[row->micro_batch] = std::min(least[row->micro_batch], o.workspace_bytes);
  for (int64_t b = 2; b <= batch; ++b)
    for (int64_t first = 1; first <= b / 2; ++first)
      least[b] = std::min(least[b], std::max(least[first], least[b - first]));
  // The policy always allows the whole batch, so some configuration exists.
  MPLAN_CHECK(least[batch] != kNoBytes, "kernel " + table.kernel + ": no configuration at all");
  return least[batch];
}

}  // namespace mplan::microbatch
