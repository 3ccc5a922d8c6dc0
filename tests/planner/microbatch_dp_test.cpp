// WR dynamic programming and desirable sets (mu-cuDNN §III-B, §III-C1)
// checked against exhaustive enumeration of every configuration: every
// multiset of (micro-batch size, algorithm) whose sizes add up to B.
// Times are whole milliseconds, so sums are exact and ties are real ties.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"
#include "planner/microbatch/wr_optimizer.h"

namespace mplan::microbatch {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
const BatchSizePolicy kPolicies[] = {BatchSizePolicy::all, BatchSizePolicy::power_of_two,
                                     BatchSizePolicy::undivided};

// A random kernel: per micro-batch b and algorithm, time = fixed + per-sample·b
// whole ms and a workspace in whole KiB growing with b (0 for "implicit_gemm").
BenchmarkTable random_table(std::mt19937& rng, int64_t max_batch, int algorithms) {
  const char* names[] = {"implicit_gemm", "gemm", "fft", "winograd"};
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= max_batch; ++b) sizes.push_back(b);
  return make_benchmark_table(
      "conv.fwd",
      [&](int64_t b) {
        std::vector<TaskOption> options;
        for (int a = 0; a < algorithms; ++a) {
          const double time_ms = uniform(1, 12) + uniform(1, 8) * static_cast<double>(b);
          const int64_t workspace = a == 0 ? 0 : (uniform(0, 4) + uniform(1, 6) * b) * kKiB;
          options.push_back({names[a], time_ms, workspace});
        }
        return options;
      },
      sizes);
}

// Every configuration of batch `batch` from the policy's sizes: multisets of
// (row, option) items taken in non-decreasing item order.
std::vector<Configuration> all_configurations(const BenchmarkTable& table, int64_t batch,
                                              BatchSizePolicy policy) {
  std::vector<MicroConfiguration> items;
  for (const MicroBatchBenchmark* row : rows_for_policy(table, policy, batch))
    for (const TaskOption& o : row->options)
      items.push_back({row->micro_batch, o.algorithm, o.time_ms, o.workspace_bytes});
  std::vector<Configuration> out;
  Configuration current;
  auto recurse = [&](auto&& self, size_t first_item, int64_t left) -> void {
    if (left == 0) {
      out.push_back(current);
      return;
    }
    for (size_t i = first_item; i < items.size(); ++i) {
      if (items[i].micro_batch > left) continue;
      current.micro.push_back(items[i]);
      self(self, i, left - items[i].micro_batch);
      current.micro.pop_back();
    }
  };
  recurse(recurse, 0, batch);
  return out;
}

// WR's order: time, then workspace. (Its third key, fewer micro-batches, is a
// preference the DP applies per part, not a global optimum, so it is not checked.)
using Key = std::pair<double, int64_t>;
Key key(const Configuration& c) { return {c.time_ms(), c.workspace_bytes()}; }

// The configuration uses only the policy's sizes, adds up to the batch, and
// each micro-configuration is an entry of the table.
void expect_well_formed(const Configuration& c, const BenchmarkTable& table, int64_t batch,
                        BatchSizePolicy policy) {
  EXPECT_EQ(c.batch(), batch);
  const std::vector<int64_t> sizes = micro_batch_sizes(policy, batch);
  for (const MicroConfiguration& m : c.micro) {
    EXPECT_TRUE(std::count(sizes.begin(), sizes.end(), m.micro_batch)) << m.micro_batch;
    const MicroBatchBenchmark* row = table.find(m.micro_batch);
    ASSERT_NE(row, nullptr);
    EXPECT_TRUE(std::any_of(row->options.begin(), row->options.end(), [&](const TaskOption& o) {
      return o.algorithm == m.algorithm && o.time_ms == m.time_ms &&
             o.workspace_bytes == m.workspace_bytes;
    })) << c.to_string();
  }
}

TEST(MicrobatchPolicy, SizesFollowThePaper) {
  EXPECT_EQ(micro_batch_sizes(BatchSizePolicy::all, 4), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(micro_batch_sizes(BatchSizePolicy::power_of_two, 8), (std::vector<int64_t>{1, 2, 4, 8}));
  // B itself is added when it is not a power of two (as mu-cuDNN's optimizer does).
  EXPECT_EQ(micro_batch_sizes(BatchSizePolicy::power_of_two, 12),
            (std::vector<int64_t>{1, 2, 4, 8, 12}));
  EXPECT_EQ(micro_batch_sizes(BatchSizePolicy::undivided, 12), (std::vector<int64_t>{12}));
  EXPECT_EQ(*parse_batch_size_policy("powerOfTwo"), BatchSizePolicy::power_of_two);
  const auto bad = parse_batch_size_policy("half");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("expected all, powerOfTwo or undivided"), std::string::npos);
}

TEST(MicrobatchWr, MatchesExhaustiveEnumeration) {
  std::mt19937 rng(20180604);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t max_batch = 1 + trial % 12;
    const BenchmarkTable table = random_table(rng, max_batch, 2 + trial % 3);
    for (BatchSizePolicy policy : kPolicies) {
      for (int64_t batch = 1; batch <= max_batch; ++batch) {
        const std::vector<Configuration> every = all_configurations(table, batch, policy);
        // Limits: none, about half the largest workspace, and none at all
        // beyond the zero-workspace algorithm's (which may be absent).
        for (int64_t limit : {kUnlimited, (batch * 3 + 2) * kKiB, int64_t{0}}) {
          std::optional<Key> best;
          for (const Configuration& c : every)
            if (c.workspace_bytes() <= limit && (!best || key(c) < *best)) best = key(c);
          const Result<Configuration> wr = optimize_wr(table, batch, limit, policy);
          ASSERT_EQ(wr.ok(), best.has_value()) << "batch " << batch << " limit " << limit;
          if (!best) {
            ++infeasible;
            continue;
          }
          ++feasible;
          EXPECT_EQ(key(*wr), *best) << batch_size_policy_name(policy) << " batch " << batch
                                     << " limit " << limit << ": " << wr->to_string();
          EXPECT_LE(wr->workspace_bytes(), limit);
          expect_well_formed(*wr, table, batch, policy);
        }
      }
    }
  }
  EXPECT_GT(feasible, 100);
}

TEST(MicrobatchWr, InfeasibleLimitSaysTheLeastWorkspace) {
  // Every algorithm needs workspace: 1 KiB per sample for fft, 3 KiB for gemm;
  // each call costs 1 ms more than its samples, so fewer micro-batches are faster.
  const BenchmarkTable table = make_benchmark_table(
      "conv2.fwd",
      [](int64_t b) {
        return std::vector<TaskOption>{{"fft", 1.0 + b, b * kKiB}, {"gemm", 1.0 + 2.0 * b, 3 * b * kKiB}};
      },
      micro_batch_sizes(BatchSizePolicy::all, 8));
  // Undivided needs 8 KiB; divided, micro-batches of one need 1 KiB.
  const auto undivided = optimize_wr(table, 8, 4 * kKiB, BatchSizePolicy::undivided);
  ASSERT_FALSE(undivided.ok());
  EXPECT_NE(undivided.error().message.find("conv2.fwd"), std::string::npos);
  EXPECT_NE(undivided.error().message.find("8192 B"), std::string::npos) << undivided.error().message;
  EXPECT_EQ(least_workspace_bytes(table, 8, BatchSizePolicy::all), kKiB);
  const auto divided = optimize_wr(table, 8, 4 * kKiB, BatchSizePolicy::power_of_two);
  ASSERT_TRUE(divided.ok());
  // fft at 4 samples fits 4 KiB: two micro-batches of 4, 2 x 5 ms.
  EXPECT_EQ(divided->micro_batch_count(), 2);
  EXPECT_EQ(divided->time_ms(), 10.0);
  EXPECT_EQ(divided->workspace_bytes(), 4 * kKiB);
}

TEST(MicrobatchWr, PrefersUndividedOnTies) {
  // Linear times and no workspace: every split is as fast; keep one micro-batch.
  const BenchmarkTable table = make_benchmark_table(
      "k", [](int64_t b) { return std::vector<TaskOption>{{"gemm", 2.0 * b, 0}}; },
      micro_batch_sizes(BatchSizePolicy::all, 6));
  const auto wr = optimize_wr(table, 6, 0, BatchSizePolicy::all);
  ASSERT_TRUE(wr.ok());
  EXPECT_EQ(wr->micro_batch_count(), 1);
}

std::set<std::pair<double, int64_t>> points(const std::vector<Configuration>& configurations) {
  std::set<std::pair<double, int64_t>> out;
  for (const Configuration& c : configurations) out.insert({c.time_ms(), c.workspace_bytes()});
  return out;
}

// Brute-force Pareto front: points no other point dominates.
// (Distinct points first: equal configurations dominate nothing more.)
std::set<std::pair<double, int64_t>> brute_front(const std::vector<Configuration>& configurations) {
  const std::set<std::pair<double, int64_t>> all = points(configurations);
  std::set<std::pair<double, int64_t>> out;
  for (const auto& [t, w] : all) {
    bool dominated = false;
    for (const auto& [t2, w2] : all) dominated |= t2 <= t && w2 <= w && (t2 < t || w2 < w);
    if (!dominated) out.insert({t, w});
  }
  return out;
}

TEST(MicrobatchDesirableSet, ParetoFrontMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Configuration> configurations;
    const int n = std::uniform_int_distribution<int>(0, 30)(rng);
    for (int i = 0; i < n; ++i) {
      const double t = std::uniform_int_distribution<int>(1, 10)(rng);
      const int64_t w = std::uniform_int_distribution<int>(0, 10)(rng);
      configurations.push_back(Configuration{{{1, "a", t, w}}});
    }
    const std::vector<Configuration> front = pareto_front(configurations);
    EXPECT_EQ(points(front), brute_front(configurations));
    EXPECT_EQ(front.size(), points(front).size()) << "duplicates on the front";
    for (size_t i = 1; i < front.size(); ++i) {
      EXPECT_LT(front[i - 1].workspace_bytes(), front[i].workspace_bytes());
      EXPECT_GT(front[i - 1].time_ms(), front[i].time_ms());
    }
  }
}

TEST(MicrobatchDesirableSet, DynamicProgramMatchesExhaustiveFront) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t max_batch = 1 + trial % 12;
    const BenchmarkTable table = random_table(rng, max_batch, 2 + trial % 3);
    for (BatchSizePolicy policy : kPolicies) {
      for (int64_t batch = 1; batch <= max_batch; ++batch) {
        const std::vector<Configuration> every = all_configurations(table, batch, policy);
        for (int64_t limit : {kUnlimited, (batch * 3 + 2) * kKiB}) {
          std::vector<Configuration> fitting;
          for (const Configuration& c : every)
            if (c.workspace_bytes() <= limit) fitting.push_back(c);
          const std::vector<Configuration> desirable =
              desirable_configurations(table, batch, policy, limit);
          EXPECT_EQ(points(desirable), brute_front(fitting))
              << batch_size_policy_name(policy) << " batch " << batch;
          for (const Configuration& c : desirable) expect_well_formed(c, table, batch, policy);
          // Its fastest element is WR's optimum under the same limit.
          const auto wr = optimize_wr(table, batch, limit, policy);
          ASSERT_EQ(wr.ok(), !desirable.empty());
          if (wr.ok()) {
            EXPECT_EQ(desirable.back().time_ms(), wr->time_ms());
          }
        }
      }
    }
  }
}

TEST(MicrobatchDesirableSet, HandlesAPaperSizedBatch) {
  // B = 256 with every size: the front stays small and ends at WR's optimum.
  std::mt19937 rng(99);
  const BenchmarkTable table = random_table(rng, 256, 4);
  const auto desirable = desirable_configurations(table, 256, BatchSizePolicy::all);
  ASSERT_FALSE(desirable.empty());
  EXPECT_LT(desirable.size(), 2000u);
  const auto wr = optimize_wr(table, 256, kUnlimited, BatchSizePolicy::all);
  ASSERT_TRUE(wr.ok());
  EXPECT_DOUBLE_EQ(desirable.back().time_ms(), wr->time_ms());
  EXPECT_EQ(desirable.front().workspace_bytes(), 0);  // implicit_gemm needs none
}

}  // namespace
}  // namespace mplan::microbatch
