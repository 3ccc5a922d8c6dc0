// WD (mu-cuDNN §III-C): the 0-1 ILP solved by GLPK against brute force over
// every choice of one configuration per kernel; desirable-set pruning
// (§III-C1) never loses the optimum; bad pools give clear errors; the CPLEX LP
// dump names rows and columns readably. Times are whole milliseconds, so
// totals are exact.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"
#include "planner/microbatch/wd_optimizer.h"

namespace mplan::microbatch {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

// A random kernel table: per micro-batch b and algorithm, time = fixed +
// per-sample·b whole ms, workspace in whole KiB growing with b (none for the
// first algorithm, as cuDNN's implicit GEMM).
BenchmarkTable random_table(std::mt19937& rng, const std::string& kernel, int64_t batch,
                            int algorithms) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= batch; ++b) sizes.push_back(b);
  return make_benchmark_table(
      kernel,
      [&](int64_t b) {
        std::vector<TaskOption> options;
        for (int a = 0; a < algorithms; ++a) {
          const double time_ms = uniform(1, 12) + uniform(1, 8) * static_cast<double>(b);
          const int64_t workspace = a == 0 ? 0 : (uniform(0, 4) + uniform(1, 40) * b) * kKiB;
          options.push_back({"algo" + std::to_string(a), time_ms, workspace});
        }
        return options;
      },
      sizes);
}

// Every configuration of a kernel (multisets of (size, algorithm) summing to B).
std::vector<Configuration> all_configurations(const BenchmarkTable& table, int64_t batch) {
  std::vector<MicroConfiguration> items;
  for (const MicroBatchBenchmark& row : table.rows)
    for (const TaskOption& o : row.options)
      items.push_back({row.micro_batch, o.algorithm, o.time_ms, o.workspace_bytes});
  std::vector<Configuration> out;
  Configuration current;
  auto recurse = [&](auto&& self, size_t first_item, int64_t left) -> void {
    if (left == 0) return out.push_back(current);
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

// Brute force: the least total time over every choice of one configuration
// per kernel whose workspaces add up to at most the pool; nullopt if none.
// Configurations equal in (time, workspace) are interchangeable, so each
// kernel's distinct pairs are tried, every one of them.
std::optional<double> brute_force_best_ms(const std::vector<WdKernel>& kernels, int64_t pool_bytes) {
  std::vector<std::set<std::pair<double, int64_t>>> choices;
  for (const WdKernel& k : kernels) {
    choices.emplace_back();
    for (const Configuration& c : k.configurations)
      choices.back().insert({c.time_ms(), c.workspace_bytes()});
  }
  std::optional<double> best;
  auto recurse = [&](auto&& self, size_t k, double time_ms, int64_t workspace) -> void {
    if (workspace > pool_bytes) return;
    if (k == kernels.size()) {
      if (!best || time_ms < *best) best = time_ms;
      return;
    }
    for (const auto& [t, w] : choices[k]) self(self, k + 1, time_ms + t, workspace + w);
  };
  recurse(recurse, 0, 0.0, 0);
  return best;
}

int64_t least_and_most(const std::vector<WdKernel>& kernels, int64_t& most) {
  int64_t least = 0;
  most = 0;
  for (const WdKernel& k : kernels) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (const Configuration& c : k.configurations)
      lo = std::min(lo, c.workspace_bytes()), hi = std::max(hi, c.workspace_bytes());
    least += lo;
    most += hi;
  }
  return least;
}

void expect_valid(const WdSolution& s, const std::vector<WdKernel>& kernels, int64_t pool_bytes) {
  ASSERT_EQ(s.chosen.size(), kernels.size());
  double time_ms = 0;
  int64_t workspace = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    ASSERT_GE(s.chosen[k], 0);
    ASSERT_LT(s.chosen[k], static_cast<int>(kernels[k].configurations.size()));
    time_ms += kernels[k].configurations[s.chosen[k]].time_ms();
    workspace += kernels[k].configurations[s.chosen[k]].workspace_bytes();
  }
  EXPECT_EQ(s.total_time_ms, time_ms);
  EXPECT_EQ(s.total_workspace_bytes, workspace);
  EXPECT_LE(workspace, pool_bytes);
  EXPECT_EQ(s.kernel_classes, static_cast<int>(wd_kernel_classes(kernels, pool_bytes).size()));
  EXPECT_LE(s.kernel_classes, static_cast<int>(kernels.size()));
  EXPECT_EQ(s.rows, s.kernel_classes + 1);
}

TEST(MicrobatchWd, GlpkMatchesBruteForceOverDesirableSets) {
  std::mt19937 rng(42);
  int pool_matters = 0;  // instances whose optimum changes with the pool
  for (int trial = 0; trial < 60; ++trial) {
    const int n_kernels = 1 + trial % 6;
    std::vector<WdKernel> kernels;
    for (int k = 0; k < n_kernels; ++k) {
      const std::string name = "conv" + std::to_string(k) + ".fwd";
      // Up to 8 samples for up to 3 kernels, 4 beyond: brute force stays fast.
      const int64_t batch = std::uniform_int_distribution<int>(1, n_kernels <= 3 ? 8 : 4)(rng);
      const BenchmarkTable table = random_table(rng, name, batch, 3);
      kernels.push_back({name, desirable_configurations(table, batch, BatchSizePolicy::all)});
    }
    int64_t most = 0;
    const int64_t least = least_and_most(kernels, most);
    // Pools from the least feasible one to one where every kernel gets its fastest.
    pool_matters += *brute_force_best_ms(kernels, least) > *brute_force_best_ms(kernels, most);
    for (double fraction : {0.0, 0.1, 0.3, 0.6, 1.0}) {
      const int64_t pool = least + static_cast<int64_t>(fraction * (most - least));
      const auto expected = brute_force_best_ms(kernels, pool);
      ASSERT_TRUE(expected.has_value());
      const auto wd = optimize_wd(kernels, {pool, /*verbose=*/false});
      ASSERT_TRUE(wd.ok()) << wd.error().message;
      expect_valid(*wd, kernels, pool);
      EXPECT_EQ(wd->total_time_ms, *expected)
          << n_kernels << " kernels, pool " << pool << " (least " << least << ")";
    }
  }
  EXPECT_GT(pool_matters, 40);
}

TEST(MicrobatchWd, PruningToDesirableSetsKeepsTheOptimum) {
  // The ILP over desirable sets equals brute force over every configuration
  // of every kernel, dominated ones included (§III-C1, proof).
  std::mt19937 rng(2018);
  for (int trial = 0; trial < 25; ++trial) {
    const int n_kernels = 2 + trial % 2;
    std::vector<WdKernel> every, desirable;
    for (int k = 0; k < n_kernels; ++k) {
      const std::string name = "conv" + std::to_string(k) + ".bwd_data";
      const int64_t batch = std::uniform_int_distribution<int>(1, 5)(rng);
      const BenchmarkTable table = random_table(rng, name, batch, 2 + trial % 2);
      every.push_back({name, all_configurations(table, batch)});
      desirable.push_back({name, desirable_configurations(table, batch, BatchSizePolicy::all)});
    }
    int64_t most = 0;
    const int64_t least = least_and_most(every, most);
    for (double fraction : {0.0, 0.25, 0.5, 1.0}) {
      const int64_t pool = least + static_cast<int64_t>(fraction * (most - least));
      const auto expected = brute_force_best_ms(every, pool);
      ASSERT_TRUE(expected.has_value());
      const auto wd = optimize_wd(desirable, {pool, false});
      ASSERT_TRUE(wd.ok()) << wd.error().message;
      expect_valid(*wd, desirable, pool);
      EXPECT_EQ(wd->total_time_ms, *expected);
      // Pruning shrinks the ILP.
      const auto unpruned = optimize_wd(every, {pool, false});
      ASSERT_TRUE(unpruned.ok());
      EXPECT_EQ(unpruned->total_time_ms, *expected);
      EXPECT_LE(wd->binary_variables, unpruned->binary_variables);
    }
  }
}

TEST(MicrobatchWd, MergedIlpOnSharedTablesMatchesBruteForceOverUnmergedProblem) {
  // Several kernels with the same table (ResNet's repeated blocks) share
  // integer variables n_c; the merged ILP's optimum must equal brute force
  // over the un-merged problem (one choice per kernel) and the 0-1 ILP.
  std::mt19937 rng(7);
  int merged_instances = 0;  // instances where some class had two or more kernels
  for (int trial = 0; trial < 40; ++trial) {
    const int n_tables = 1 + trial % 3;
    const int n_kernels = 2 + trial % 5;  // 2..6
    std::vector<std::vector<Configuration>> tables;
    for (int t = 0; t < n_tables; ++t) {
      const int64_t batch = std::uniform_int_distribution<int>(1, 4)(rng);
      tables.push_back(desirable_configurations(
          random_table(rng, "t" + std::to_string(t), batch, 3), batch, BatchSizePolicy::all));
    }
    std::vector<WdKernel> kernels;
    std::vector<int> table_of;
    for (int k = 0; k < n_kernels; ++k) {
      table_of.push_back(std::uniform_int_distribution<int>(0, n_tables - 1)(rng));
      kernels.push_back({"res" + std::to_string(k) + ".fwd", tables[table_of.back()]});
    }
    int64_t most = 0;
    const int64_t least = least_and_most(kernels, most);
    for (double fraction : {0.0, 0.15, 0.4, 0.7, 1.0}) {
      const int64_t pool = least + static_cast<int64_t>(fraction * (most - least));
      const auto expected = brute_force_best_ms(kernels, pool);
      ASSERT_TRUE(expected.has_value());
      const auto merged = optimize_wd(kernels, {pool, false});
      ASSERT_TRUE(merged.ok()) << merged.error().message;
      expect_valid(*merged, kernels, pool);
      EXPECT_EQ(merged->total_time_ms, *expected) << n_kernels << " kernels, pool " << pool;
      WdOptions unmerged_options{pool, false};
      unmerged_options.merge_identical_kernels = false;
      const auto unmerged = optimize_wd(kernels, unmerged_options);
      ASSERT_TRUE(unmerged.ok()) << unmerged.error().message;
      EXPECT_EQ(unmerged->total_time_ms, *expected);
      EXPECT_EQ(unmerged->kernel_classes, n_kernels);
      EXPECT_EQ(unmerged->integer_variables, 0);
      EXPECT_EQ(unmerged->binary_variables, merged->unmerged_binary_variables);
      EXPECT_LE(merged->binary_variables + merged->integer_variables,
                unmerged->binary_variables);
      // Kernels of one table are in one class and, in ascending kernel order,
      // take configurations in ascending index (the deterministic mapping).
      std::set<int> used(table_of.begin(), table_of.end());
      EXPECT_LE(merged->kernel_classes, static_cast<int>(used.size()));
      merged_instances += merged->integer_variables > 0;
      for (int k = 0; k < n_kernels; ++k)
        for (int later = k + 1; later < n_kernels; ++later)
          if (table_of[k] == table_of[later]) {
            EXPECT_LE(merged->chosen[k], merged->chosen[later]);
          }
    }
  }
  EXPECT_GT(merged_instances, 100);
}

// The least total time of one configuration per kernel within the pool, by a
// knapsack over whole KiB (independent of GLPK; for many kernels, where
// brute force is out of reach). Workspaces must be whole KiB.
double knapsack_best_ms(const std::vector<WdKernel>& kernels, int64_t pool_bytes) {
  const int64_t units = pool_bytes / kKiB;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(units + 1, 0.0);  // best[u]: least time within u KiB
  for (const WdKernel& k : kernels) {
    std::vector<double> next(units + 1, inf);
    for (const Configuration& c : k.configurations) {
      EXPECT_EQ(c.workspace_bytes() % kKiB, 0);
      const int64_t w = c.workspace_bytes() / kKiB;
      for (int64_t u = w; u <= units; ++u) next[u] = std::min(next[u], best[u - w] + c.time_ms());
    }
    best = std::move(next);
  }
  return best[units];
}

TEST(MicrobatchWd, ManyRepeatedKernelsMatchKnapsack) {
  // 30 kernels of 3 tables (12, 10 and 8 copies): the 0-1 ILP's symmetry
  // would make branch and bound slow; merged, it has 3 classes.
  std::mt19937 rng(50);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<WdKernel> kernels;
    int distinct_columns = 0;
    std::set<std::vector<std::pair<double, int64_t>>> distinct_tables;
    for (int t = 0, copies = 12; t < 3; ++t, copies -= 2) {
      const int64_t batch = 6;
      std::vector<Configuration> desirable;
      std::vector<std::pair<double, int64_t>> points;
      // Redraw a table whose desirable set another table already has.
      do {
        desirable = desirable_configurations(random_table(rng, "t", batch, 3), batch,
                                             BatchSizePolicy::all);
        points.clear();
        for (const Configuration& c : desirable) points.emplace_back(c.time_ms(), c.workspace_bytes());
      } while (!distinct_tables.insert(points).second);
      distinct_columns += static_cast<int>(desirable.size());
      for (int i = 0; i < copies; ++i)
        kernels.push_back({fmt::format("stage{}.block{}.fwd", t, i), desirable});
    }
    int64_t most = 0;
    const int64_t least = least_and_most(kernels, most);
    for (double fraction : {0.0, 0.05, 0.2, 0.5, 0.8, 1.0}) {
      const int64_t pool = least + static_cast<int64_t>(fraction * (most - least));
      const auto wd = optimize_wd(kernels, {pool, false});
      ASSERT_TRUE(wd.ok()) << wd.error().message;
      expect_valid(*wd, kernels, pool);
      EXPECT_EQ(wd->total_time_ms, knapsack_best_ms(kernels, pool)) << "pool " << pool;
      // Tables differ when all their configurations fit; at a small pool the
      // configurations that fit may coincide and merge further.
      if (pool == most) {
        EXPECT_EQ(wd->kernel_classes, 3);
      }
      EXPECT_LE(wd->kernel_classes, 3);
      EXPECT_EQ(wd->binary_variables, 0);
      EXPECT_LE(wd->integer_variables, distinct_columns);  // less where a column exceeds the pool
    }
  }
}

TEST(MicrobatchWd, ClassMembersTakeConfigurationsInOrder) {
  // Three identical kernels: 30 ms with no workspace or 10 ms with 2 MiB. A
  // 4 MiB pool runs two fast: the first kernel takes the lean configuration.
  auto one = [](double t, int64_t w) { return Configuration{{{8, "a", t, w}}}; };
  const std::vector<Configuration> table = {one(30, 0), one(10, 2 * kMiB)};
  const std::vector<WdKernel> kernels = {{"a.fwd", table}, {"b.fwd", table}, {"c.fwd", table}};
  const auto wd = optimize_wd(kernels, {4 * kMiB, false});
  ASSERT_TRUE(wd.ok()) << wd.error().message;
  EXPECT_EQ(wd->chosen, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(wd->total_time_ms, 50.0);
  EXPECT_EQ(wd->kernel_classes, 1);
  EXPECT_EQ(wd->integer_variables, 2);
  EXPECT_EQ(wd->unmerged_binary_variables, 6);
  EXPECT_EQ(wd_kernel_classes(kernels, 4 * kMiB), (std::vector<std::vector<int>>{{0, 1, 2}}));
  // A configuration beyond the pool does not keep kernels apart: only what
  // fits is compared.
  std::vector<WdKernel> extra = kernels;
  extra[1].configurations.push_back(one(5, 64 * kMiB));
  EXPECT_EQ(wd_kernel_classes(extra, 4 * kMiB).size(), 1u);
  EXPECT_EQ(wd_kernel_classes(extra, 64 * kMiB).size(), 2u);
  const auto wd_extra = optimize_wd(extra, {4 * kMiB, false});
  ASSERT_TRUE(wd_extra.ok());
  EXPECT_EQ(wd_extra->chosen, (std::vector<int>{0, 1, 1}));
}

// Two kernels: conv1 runs in 10 ms with 2 MiB or 30 ms with none; conv2 in
// 5 ms with 3 MiB or 8 ms with 1 MiB.
std::vector<WdKernel> two_kernels() {
  auto one = [](double t, int64_t w) { return Configuration{{{8, "a", t, w}}}; };
  return {{"conv1.fwd", {one(30, 0), one(10, 2 * kMiB)}},
          {"conv2.fwd", {one(8, 1 * kMiB), one(5, 3 * kMiB)}}};
}

TEST(MicrobatchWd, SplitsThePoolWhereItSavesMost) {
  // 3 MiB: conv1 fast + conv2 lean (18 ms) beats conv1 lean + conv2 fast (35 ms).
  const auto wd = optimize_wd(two_kernels(), {3 * kMiB, false});
  ASSERT_TRUE(wd.ok()) << wd.error().message;
  EXPECT_EQ(wd->chosen, (std::vector<int>{1, 0}));
  EXPECT_EQ(wd->total_time_ms, 18.0);
  EXPECT_EQ(wd->total_workspace_bytes, 3 * kMiB);
  // 5 MiB: both fast. 1 MiB: both lean. The configuration that alone exceeds
  // the pool gets no variable.
  EXPECT_EQ(optimize_wd(two_kernels(), {5 * kMiB, false})->total_time_ms, 15.0);
  const auto tight = optimize_wd(two_kernels(), {1 * kMiB, false});
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->total_time_ms, 38.0);
  EXPECT_EQ(tight->binary_variables, 2);
}

TEST(MicrobatchWd, TooSmallPoolSaysTheLeastNeeded) {
  const auto wd = optimize_wd(two_kernels(), {1 * kMiB - 1, false});
  ASSERT_FALSE(wd.ok());
  const std::string& message = wd.error().message;
  EXPECT_NE(message.find("too small"), std::string::npos) << message;
  EXPECT_NE(message.find("1048575 B"), std::string::npos) << message;  // the pool
  EXPECT_NE(message.find("1048576 B"), std::string::npos) << message;  // the least
}

TEST(MicrobatchWd, KernelWithoutConfigurationsIsAnError) {
  auto kernels = two_kernels();
  kernels[1].configurations.clear();
  const auto wd = optimize_wd(kernels, {64 * kMiB, false});
  ASSERT_FALSE(wd.ok());
  EXPECT_NE(wd.error().message.find("conv2.fwd"), std::string::npos) << wd.error().message;
}

TEST(MicrobatchWd, DumpsTheProblemInCplexLpFormat) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("mplan_wd_" + std::to_string(::getpid()) + ".lp");
  ASSERT_TRUE(dump_wd_lp(two_kernels(), 3 * kMiB, path.string()).ok());
  std::ifstream in(path);
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string lp = text.str();
  std::filesystem::remove(path);
  // GLPK's LP writer spells [ ] as ( ).
  EXPECT_NE(lp.find("Minimize"), std::string::npos) << lp;
  EXPECT_NE(lp.find("workspace:"), std::string::npos) << lp;
  EXPECT_NE(lp.find("kernel(conv1.fwd):"), std::string::npos) << lp;
  EXPECT_NE(lp.find("kernel(conv2.fwd):"), std::string::npos) << lp;
  EXPECT_NE(lp.find("x(conv2.fwd)(1)"), std::string::npos) << lp;
  EXPECT_EQ(lp.find("r_1"), std::string::npos) << "a row lost its name:\n" << lp;

  // Kernels with the same configurations share one row and integer columns.
  auto kernels = two_kernels();
  kernels.insert(kernels.begin() + 1, {"conv1b.fwd", kernels[0].configurations});
  ASSERT_TRUE(dump_wd_lp(kernels, 5 * kMiB, path.string()).ok());
  std::ifstream merged_in(path);
  std::stringstream merged_text;
  merged_text << merged_in.rdbuf();
  const std::string merged = merged_text.str();
  std::filesystem::remove(path);
  EXPECT_NE(merged.find("class(conv1.fwd):"), std::string::npos) << merged;
  EXPECT_NE(merged.find("n(conv1.fwd)(1)"), std::string::npos) << merged;
  EXPECT_NE(merged.find("kernel(conv2.fwd):"), std::string::npos) << merged;
  EXPECT_EQ(merged.find("conv1b"), std::string::npos) << merged;
  EXPECT_EQ(merged.find("r_1"), std::string::npos) << merged;
  EXPECT_EQ(merged.find("x_1"), std::string::npos) << "a column lost its name:\n" << merged;

  const Status unwritable = dump_wd_lp(two_kernels(), 3 * kMiB, "/nonexistent-dir/wd.lp");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_EQ(unwritable.error().where.file, "/nonexistent-dir/wd.lp");
}

}  // namespace
}  // namespace mplan::microbatch
