// The price of a recomputation (CostModel::recompute_ms; SuperNeurons §3.4).
// A task run again with its first run's kernel costs its first run's time,
// but batch norm recomputes from its saved statistics: the normalisation
// alone, without the statistics pass. Each cost model prices that run of its
// own (analytic: its work; CPU: timed; profile: its "recompute" series), and a
// profile without one scales the first run by the two runs' memory traffic.

#include <gtest/gtest.h>

#include <string>

#include "profiler/analytic_model.h"
#include "profiler/cpu_measured.h"
#include "profiler/kernel_jobs.h"
#include "profiler/memoized_cost_model.h"
#include "profiler/profile.h"
#include "profiler/task_invocation.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

struct SmallCnn {
  Model model = test::parse_or_die(test::kSmallCnn);
  Tdfg tdfg = build_tdfg(model);
  TaskId fp(const std::string& layer) const { return tdfg.fp_of.at(model.find(layer)); }
};

AnalyticCostModel p100() { return AnalyticCostModel(test::device_or_die("p100")); }

double recompute_of_fastest(const CostModel& cost, const Tdfg& tdfg, TaskId t, int64_t b) {
  return cost.recompute_ms(tdfg, t, b, fastest_option(cost, tdfg, t, b));
}

TEST(RecomputeCost, OnlyABatchNormsForwardRecomputesFromWhatItSaved) {
  const SmallCnn net;
  EXPECT_TRUE(recomputes_from_saved(net.tdfg, net.fp("bn1")));
  for (const char* layer : {"conv1", "relu1", "pool", "lrn", "drop"})
    EXPECT_FALSE(recomputes_from_saved(net.tdfg, net.fp(layer))) << layer;
  EXPECT_FALSE(recomputes_from_saved(net.tdfg, net.tdfg.bp1_of.at(net.model.find("bn1"))));
}

// Its kernels: the normalisation with the saved statistics, nothing else.
TEST(RecomputeCost, ARecomputationRunsTheNormalisationAlone) {
  const SmallCnn net;
  const TaskShape shape = describe_task(net.tdfg, net.fp("bn1"));
  const TaskInvocation first = invoke_task_shape(shape, 4, 0, 0);
  const TaskInvocation again = invoke_recomputation(shape, 4);
  ASSERT_EQ(first.invocation.calls.size(), 1u);
  EXPECT_EQ(first.invocation.calls[0].kernel, rt::Kernel::batchnorm_forward_train);
  ASSERT_EQ(again.invocation.calls.size(), 1u);
  EXPECT_EQ(again.invocation.calls[0].kernel, rt::Kernel::batchnorm_forward_saved);
  // Statistics read once, input read and output written: 3 passes; again: 2.
  EXPECT_DOUBLE_EQ(recompute_traffic_ratio(shape, 4), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(recompute_traffic_ratio(describe_task(net.tdfg, net.fp("relu1")), 4), 1.0);
}

TEST(RecomputeCost, TheAnalyticModelPricesTheRecomputationsOwnWork) {
  const SmallCnn net;
  const AnalyticCostModel cost = p100();
  const TaskId bn = net.fp("bn1");
  const double first = fastest_option(cost, net.tdfg, bn, 16).time_ms;
  const double again = recompute_of_fastest(cost, net.tdfg, bn, 16);
  EXPECT_LT(again, first);
  EXPECT_GT(again, 0);
  EXPECT_EQ(again, *cost.recompute_from_saved_ms(net.tdfg, bn, 16));
  // Every other task reruns at its first run's time, whatever option it ran.
  for (const char* layer : {"conv1", "relu1", "pool", "lrn"})
    for (const TaskOption& o : cost.options(net.tdfg, net.fp(layer), 16))
      EXPECT_EQ(cost.recompute_ms(net.tdfg, net.fp(layer), 16, o), o.time_ms) << layer << " " << o.algorithm;
  // A memoized model answers as its source.
  const MemoizedCostModel memo(cost, net.tdfg);
  EXPECT_EQ(recompute_of_fastest(memo, net.tdfg, bn, 16), again);
  EXPECT_EQ(recompute_of_fastest(memo, net.tdfg, bn, 16), again);
}

// A profile written from a model records the recomputations it prices, reads
// them back, and interpolates between sub-batches as it does other tasks.
TEST(RecomputeCost, AProfileRecordsRecomputationsAndServesThem) {
  const SmallCnn net;
  const AnalyticCostModel analytic = p100();
  const Profile written = make_profile(net.tdfg, analytic, {4, 8, 16}, "p100");
  int recorded = 0;
  for (const ProfileEntry& e : written.entries) {
    const bool batch_norm = e.signature.rfind("batchnorm ", 0) == 0;
    EXPECT_EQ(e.tasks.count(kRecomputeKind), batch_norm ? 1u : 0u) << e.signature;
    recorded += batch_norm;
  }
  EXPECT_EQ(recorded, 1);
  Result<Profile> read = parse_profile(profile_to_json(written), "profile.json");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  auto replay = RecordedCostModel::create(*read, net.tdfg, {}, "profile.json");
  ASSERT_TRUE(replay.ok()) << replay.error().to_string();
  const TaskId bn = net.fp("bn1");
  for (int64_t b : {4, 8, 16})
    EXPECT_EQ(recompute_of_fastest(**replay, net.tdfg, bn, b), recompute_of_fastest(analytic, net.tdfg, bn, b));
  EXPECT_NEAR(recompute_of_fastest(**replay, net.tdfg, bn, 6),
              (recompute_of_fastest(analytic, net.tdfg, bn, 4) + recompute_of_fastest(analytic, net.tdfg, bn, 8)) / 2,
              1e-12);
}

// A profile from before recomputations were timed: the first run's time
// scaled by the traffic ratio (2/3 for batch norm), never the first run's.
TEST(RecomputeCost, AProfileWithoutThemScalesTheFirstRunByItsTraffic) {
  const SmallCnn net;
  Profile profile = make_profile(net.tdfg, p100(), {4, 16}, "p100");
  for (ProfileEntry& e : profile.entries) e.tasks.erase(kRecomputeKind);
  auto replay = RecordedCostModel::create(profile, net.tdfg, {}, "profile.json");
  ASSERT_TRUE(replay.ok()) << replay.error().to_string();
  const TaskId bn = net.fp("bn1");
  EXPECT_FALSE((*replay)->recompute_from_saved_ms(net.tdfg, bn, 16).has_value());
  const double first = fastest_option(**replay, net.tdfg, bn, 16).time_ms;
  EXPECT_DOUBLE_EQ(recompute_of_fastest(**replay, net.tdfg, bn, 16), first * 2.0 / 3.0);
}

TEST(RecomputeCost, AProfileWithAnUnknownTaskKindIsRefusedNamingIt) {
  const SmallCnn net;
  std::string text = profile_to_json(make_profile(net.tdfg, p100(), {4}, "p100"));
  const size_t at = text.find("\"recompute\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 11, "\"recomputed\"");
  Result<Profile> read = parse_profile(text, "p.json");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find(".tasks.recomputed"), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find("recompute"), std::string::npos) << read.error().message;
}

// The CPU profiler times the recomputation's kernels, once per shape.
TEST(RecomputeCost, TheCpuProfilerTimesTheRecomputationOnce) {
  const SmallCnn net;
  CpuMeasureOptions options;
  options.repeats = 1;
  const CpuMeasuredCostModel cost(options);
  const TaskId bn = net.fp("bn1");
  const std::optional<double> again = cost.recompute_from_saved_ms(net.tdfg, bn, 4);
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(*again, 0);
  EXPECT_EQ(cost.measurements(), 1);
  EXPECT_EQ(cost.recompute_from_saved_ms(net.tdfg, bn, 4), again);
  EXPECT_EQ(cost.measurements(), 1);
  EXPECT_EQ(recompute_of_fastest(cost, net.tdfg, bn, 4), *again);
}

// The kernel profiler's job file has one job more per batch norm shape and
// sub-batch: its recomputation, keyed apart; results with it make a profile
// that records it, results without it (an older job file) one that does not.
TEST(RecomputeCost, TheKernelProfilersJobsTimeTheRecomputationApart) {
  const SmallCnn net;
  const rt::JobFile jobs = make_jobs(net.tdfg, {4}, 1, 0);
  const TaskShape bn = describe_task(net.tdfg, net.fp("bn1"));
  const std::string key = recompute_job_key(bn, 4);
  EXPECT_EQ(key, layer_signature(bn) + " recompute@4");
  int found = 0;
  for (const rt::Job& job : jobs.jobs) {
    if (job.key.find(" recompute@") == std::string::npos) continue;
    ++found;
    EXPECT_EQ(job.key, key);
    ASSERT_EQ(job.calls.size(), 1u);
    EXPECT_EQ(job.calls[0].kernel, rt::Kernel::batchnorm_forward_saved);
  }
  EXPECT_EQ(found, 1);
  rt::ResultFile results;
  results.math = "fp32";
  results.backend.device = "test";
  results.backend.memory_bytes = int64_t{1} << 30;
  for (const rt::Job& job : jobs.jobs) {
    rt::JobResult r;
    r.key = job.key;
    r.options.push_back({"default", job.key == key ? 0.25 : 1.0, 0});
    results.results.push_back(r);
  }
  for (int64_t bytes : {int64_t{1} << 20, int64_t{4} << 20})
    results.copies.push_back({bytes, bytes / 1e6, bytes / 1e6, 0});
  Result<Profile> profile = merge_results(net.tdfg, results, {4}, "times.json");
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  auto cost = RecordedCostModel::create(*profile, net.tdfg, {}, "profile.json");
  ASSERT_TRUE(cost.ok()) << cost.error().to_string();
  EXPECT_EQ(recompute_of_fastest(**cost, net.tdfg, net.fp("bn1"), 4), 0.25);
  std::erase_if(results.results, [&](const rt::JobResult& r) { return r.key == key; });
  Result<Profile> older = merge_results(net.tdfg, results, {4}, "times.json");
  ASSERT_TRUE(older.ok()) << older.error().to_string();
  for (const ProfileEntry& e : older->entries) EXPECT_EQ(e.tasks.count(kRecomputeKind), 0u) << e.signature;
}

}  // namespace
}  // namespace mplan
